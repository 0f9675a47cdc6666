package eventtime.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The map-side combine's table: one entry per (user key, slice), open addressing over a
 * primitive array that holds, per slot, the 64-bit hash, the slice and (for one key column of
 * short text, or of integers) the key itself, packed exactly into two longs. A row's lookup then
 * allocates nothing and, for such keys, compares without reading any object; other keys compare
 * as {@link Objects#equals} (binary keys by content) once hash and slice match.
 *
 * <p>Text keys come either as Spark's {@link UTF8String} (from {@link Fold}, in the generated
 * code: packed from their UTF-8 bytes, up to 15) or as Java strings (from a {@code Row}: up to
 * 15 Latin-1 characters); one task uses one of the two (see MapTask.textKeysAsBytes).
 */
final class Partials {
  static final class Entry {
    final long slice;
    /**
     * The keys as they came (text as a Java string, or as a copy of its UTF8String: never decoded,
     * the partial row carries its bytes; {@link Spec#bucketOf} hashes both alike).
     */
    final Object[] keys;
    final Acc[] accs;
    /** Session windows: the key's partial sessions (the entry's slice is 0, its accs unused). */
    SessionPartials sessions;

    Entry(long slice, Object[] keys, Acc[] accs) {
      this.slice = slice;
      this.keys = keys;
      this.accs = accs;
    }
  }

  // slot i: t[4i] hash (0 = empty), t[4i+1] slice, t[4i+2..4i+3] the packed key (see pack)
  private static final int STRIDE = 4;
  /** Packed-key first word of a key that is not packed (no packed text has this length byte). */
  private static final long NOT_PACKED = 0xFF;
  private static final long NULL_TEXT = 0xFE, INTEGER = 1, NULL_INTEGER = 2;
  private static final boolean LITTLE_ENDIAN = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN;

  private long[] t;
  private Entry[] entries;
  /** entries[i].accs, held apart so that a hit reads one array slot, not the entry too. */
  private Acc[][] accsAt;
  private int size;
  private long packA, packB;

  /** A table of {@code capacity} slots (a power of two), which doubles when half full. */
  Partials(int capacity) {
    t = new long[capacity * STRIDE];
    entries = new Entry[capacity];
    accsAt = new Acc[capacity][];
  }

  int capacity() {
    return entries.length;
  }

  static long hash(Object[] src, int k0, int nk, long slice) {
    long h = 0x9E3779B97F4A7C15L + slice;
    for (int i = 0; i < nk; i++) {
      Object k = src[k0 + i];
      int e = k == null ? 0 : k instanceof byte[] ? Arrays.hashCode((byte[]) k) : k.hashCode();
      h = (h ^ e) * 0xFF51AFD7ED558CCDL;
      h ^= h >>> 33;
    }
    h *= 0xC4CEB9FE1A85EC53L;
    h ^= h >>> 33;
    return h == 0 ? 1 : h;
  }

  /** The hash of a packed key and its slice (the packed words are the key, exactly). */
  private static long hashPacked(long a, long b, long slice) {
    long h = (a * 0x9E3779B97F4A7C15L) ^ b;
    h = (h ^ (h >>> 31)) * 0xFF51AFD7ED558CCDL;
    h = (h ^ slice ^ (h >>> 33)) * 0xC4CEB9FE1A85EC53L;
    h ^= h >>> 33;
    return h == 0 ? 1 : h;
  }

  /**
   * Packs one key into (packA, packB), exactly: text of at most 15 UTF-8 bytes (a UTF8String: its
   * first 8 bytes, then the rest with its length in the top byte) or 15 Latin-1 characters (a
   * String: its length and characters); a long, int, short or byte as its value. Returns false
   * for anything else. One key column has one type, so packed texts and packed integers never
   * meet, and one task packs text one of the two ways (MapTask.textKeysAsBytes). No packed key
   * is (NOT_PACKED, 0) or (NULL_TEXT, NULL_INTEGER).
   */
  private boolean pack(Object k) {
    if (k instanceof UTF8String) {
      UTF8String s = (UTF8String) k;
      int n = s.numBytes();
      if (n > 15) return false;
      Object base = s.getBaseObject();
      long at = s.getBaseOffset();
      if (!LITTLE_ENDIAN) {
        long a = n, b = 0;
        for (int i = 0; i < n; i++) {
          long c = s.getByte(i) & 0xFFL;
          if (i < 7) a |= c << (8 * (i + 1));
          else b |= c << (8 * (i - 7));
        }
        packA = a;
        packB = b | ((long) n << 56);
      } else if (n >= 8) {
        // bytes 0..7 in a, bytes 8..n-1 (the top of the word ending at byte n) and n in b; every
        // read stays inside the string's own bytes
        packA = Platform.getLong(base, at);
        packB = (n == 8 ? 0 : Platform.getLong(base, at + n - 8) >>> (8 * (16 - n))) | ((long) n << 56);
      } else {
        long a = 0;
        for (int i = 0; i < n; i++) a |= (Platform.getByte(base, at + i) & 0xFFL) << (8 * i);
        packA = a;
        packB = (long) n << 56;
      }
      return true;
    }
    if (k instanceof String) {
      String s = (String) k;
      int n = s.length();
      if (n > 15) return false;
      long a = n, b = 0;
      for (int i = 0; i < n; i++) {
        char c = s.charAt(i);
        if (c > 0xFF) return false;
        if (i < 7) a |= (long) c << (8 * (i + 1));
        else b |= (long) c << (8 * (i - 7));
      }
      packA = a;
      packB = b;
      return true;
    }
    if (k instanceof Long || k instanceof Integer || k instanceof Short || k instanceof Byte) {
      packA = ((Number) k).longValue();
      packB = INTEGER;
      return true;
    }
    return false;
  }

  /** {@code k.toString().hashCode()} of a UTF8String, without decoding it when it is ASCII. */
  static int stringHash(Object k) {
    UTF8String s = (UTF8String) k;
    Object base = s.getBaseObject();
    long at = s.getBaseOffset();
    int h = 0;
    for (int i = 0, n = s.numBytes(); i < n; i++) {
      byte b = Platform.getByte(base, at + i);
      if (b < 0) return s.toString().hashCode();  // not ASCII: the Java string's UTF-16 units differ
      h = 31 * h + b;
    }
    return h;
  }

  private static boolean sameKeys(Object[] keys, Object[] src, int k0) {
    for (int i = 0; i < keys.length; i++) {
      Object a = keys[i], b = src[k0 + i];
      if (a instanceof byte[]) {
        if (!(b instanceof byte[]) || !Arrays.equals((byte[]) a, (byte[]) b)) return false;
      } else if (!Objects.equals(a, b)) {
        return false;
      }
    }
    return true;
  }

  /** The accumulators of (the keys src[k0 .. k0 + nk), slice), created empty on first use. */
  Acc[] get(Object[] src, int k0, int nk, long slice, int na) {
    int i = slot(src, k0, nk, slice, na);  // first: it may grow the table (a new accsAt)
    return accsAt[i];
  }

  /** The entry of (the keys src[k0 .. k0 + nk), slice), created (with na empty accumulators) on first use. */
  Entry entry(Object[] src, int k0, int nk, long slice, int na) {
    int i = slot(src, k0, nk, slice, na);  // first: it may grow the table (a new entries)
    return entries[i];
  }

  private int slot(Object[] src, int k0, int nk, long slice, int na) {
    boolean packed = false;
    if (nk == 1) {
      Object k = src[k0];
      if (k == null) {
        // a null key packs too: as text or as integer, whichever the column is (both are exact)
        packA = NULL_TEXT;
        packB = NULL_INTEGER;
        packed = true;
      } else {
        packed = pack(k);
      }
    }
    long h;
    if (packed) {
      h = hashPacked(packA, packB, slice);  // no second pass over the key's bytes
    } else {
      packA = NOT_PACKED;
      packB = 0;
      h = hash(src, k0, nk, slice);
    }
    long[] t = this.t;
    int mask = entries.length - 1;
    for (int i = (int) h & mask; ; i = (i + 1) & mask) {
      int at = i * STRIDE;
      long slotHash = t[at];
      if (slotHash == 0) {
        Acc[] accs = new Acc[na];
        for (int j = 0; j < na; j++) accs[j] = new Acc();
        t[at] = h;
        t[at + 1] = slice;
        t[at + 2] = packA;
        t[at + 3] = packB;
        entries[i] = newEntry(slice, src, k0, nk, accs);
        accsAt[i] = accs;
        if (++size * 2 > entries.length) return grow(i);
        return i;
      }
      if (slotHash == h && t[at + 1] == slice && t[at + 2] == packA && t[at + 3] == packB
          && (packed || sameKeys(entries[i].keys, src, k0))) {
        return i;
      }
    }
  }

  private static Entry newEntry(long slice, Object[] src, int k0, int nk, Acc[] accs) {
    Object[] keys = Arrays.copyOfRange(src, k0, k0 + nk);
    for (int i = 0; i < nk; i++) {
      // a copy: the row's UTF8String points into a buffer Spark reuses for the next row
      if (keys[i] instanceof UTF8String) keys[i] = ((UTF8String) keys[i]).clone();
    }
    return new Entry(slice, keys, accs);
  }

  /** Doubles the table; returns where the entry at slot {@code at} moved. */
  private int grow(int at) {
    Entry moving = entries[at];
    int moved = -1;
    long[] oldT = t;
    Entry[] oldEntries = entries;
    t = new long[oldT.length * 2];
    entries = new Entry[oldEntries.length * 2];
    accsAt = new Acc[entries.length][];
    int mask = entries.length - 1;
    for (int i = 0; i < oldEntries.length; i++) {
      if (oldEntries[i] == null) continue;
      int j = (int) oldT[i * STRIDE] & mask;
      while (entries[j] != null) j = (j + 1) & mask;
      System.arraycopy(oldT, i * STRIDE, t, j * STRIDE, STRIDE);
      entries[j] = oldEntries[i];
      accsAt[j] = oldEntries[i].accs;
      if (oldEntries[i] == moving) moved = j;
    }
    return moved;
  }

  int size() {
    return size;
  }

  /** Every entry, in table order; the table is empty afterwards. */
  List<Entry> drain() {
    List<Entry> out = new ArrayList<>(size);
    for (Entry e : entries) if (e != null) out.add(e);
    t = new long[16 * STRIDE];
    entries = new Entry[16];
    accsAt = new Acc[16][];
    size = 0;
    return out;
  }
}
