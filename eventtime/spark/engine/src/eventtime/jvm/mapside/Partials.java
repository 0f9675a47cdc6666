package eventtime.jvm.mapside;

import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The map-side combine's table: one entry per (user key, slice), open addressing over a
 * primitive array that holds, per slot, the hash with the entry's number, the slice and (for one
 * key column of short text, or of integers) the key itself, packed exactly into two longs. A
 * row's lookup then allocates nothing and, for such keys, compares without reading any object;
 * other keys compare as {@link Objects#equals} (binary keys by content) once hash and slice match.
 *
 * <p>The entries' own data are dense arrays by entry number, drained in that order: their slice
 * and packed key, their keys (to compare keys that do not pack; a text key packed from its bytes
 * is drained from the packed words, never copied), and their accumulators. When every aggregation
 * is {@link Acc#numeric} (count, sums and means of numbers), an entry's accumulators are words of
 * one {@code long[]}, next to each other, only the words each uses ({@link Acc#words}: a count
 * and a float sum take three): a row then reads one slot and one short run of words, not an
 * array of accumulator objects scattered over the heap, and the table holds no object per
 * accumulator for the young collections to copy. Session windows keep each key's {@link
 * SessionPartials}.
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
    final SessionPartials sessions;

    Entry(long slice, Object[] keys, Acc[] accs, SessionPartials sessions) {
      this.slice = slice;
      this.keys = keys;
      this.accs = accs;
      this.sessions = sessions;
    }
  }

  // slot i: t[4i] the hash's high 32 bits | (entry number + 1) (0 = empty), t[4i+1] slice,
  // t[4i+2..4i+3] the packed key (see pack); a key's probe starts at its hash's high 32 bits
  private static final int STRIDE = 4;
  private static final long HIGH = 0xFFFFFFFF00000000L;
  /** Packed-key first word of a key that is not packed (no packed text has this length byte). */
  private static final long NOT_PACKED = 0xFF;
  private static final long NULL_TEXT = 0xFE, INTEGER = 1, NULL_INTEGER = 2;
  private static final boolean LITTLE_ENDIAN = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN;

  private final Spec spec;
  private final int na;
  /** Words per entry in {@link #numbers} (numeric accumulators), or 0: accumulator objects. */
  private final int width;
  /** Per aggregation, its words in an entry of {@link #numbers} ({@link Acc#words}). */
  private final int[] accWords;
  private long[] t;
  private int size;
  private long packA, packB;
  // by entry number: its slice and packed key (as in its slot, read in order when drained), its keys
  // (null for a text key packed from its UTF-8 bytes: drained from the packed words, so the table
  // neither copies it nor, when drained, reads it back from wherever the copy lies)
  private long[] words;
  private Object[][] keys;
  private long[] numbers;
  private Acc[][] accs;
  private SessionPartials[] sessions;
  /** The accumulator a numeric entry's words are loaded into, added to, and stored from. */
  private final Acc cursor = new Acc();

  /** A table of {@code capacity} slots (a power of two), which doubles when half full. */
  Partials(Spec spec, int capacity) {
    this.spec = spec;
    this.na = spec.aggKinds.length;
    boolean numeric = !spec.session;
    for (int i = 0; numeric && i < na; i++) numeric = Acc.numeric(spec, i);
    this.accWords = new int[na];
    int w = 0;
    for (int i = 0; numeric && i < na; i++) w += accWords[i] = Acc.words(spec, i);
    this.width = w;
    allocate(capacity);
  }

  private void allocate(int capacity) {
    t = new long[capacity * STRIDE];
    int entries = capacity / 2 + 1;
    words = new long[entries * 3];
    keys = new Object[entries][];
    if (spec.session) sessions = new SessionPartials[entries];
    else if (width > 0) numbers = new long[entries * width];
    else accs = new Acc[entries][];
    size = 0;
  }

  int capacity() {
    return t.length / STRIDE;
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

  /**
   * Folds a live row at {@code ms} into (the keys src[k0 .. k0 + nk), slice): its aggregated
   * values follow its keys in src.
   */
  void fold(Object[] src, int k0, int nk, long slice, long ms) {
    int e = entry(src, k0, nk, slice);
    int v0 = k0 + nk;
    if (width > 0) {
      Acc a = cursor;
      for (int i = 0, at = e * width; i < na; at += accWords[i], i++) {
        a.load(numbers, at, accWords[i]);
        a.add(spec, i, src[v0 + i], ms);
        a.store(numbers, at, accWords[i]);
      }
      return;
    }
    Acc[] a = accs[e];
    for (int i = 0; i < na; i++) a[i].add(spec, i, src[v0 + i], ms);
  }

  /** The partial sessions of the keys src[k0 .. k0 + nk) (session windows), created on first use. */
  SessionPartials sessions(Object[] src, int k0, int nk) {
    int e = entry(src, k0, nk, 0);
    SessionPartials p = sessions[e];
    if (p == null) sessions[e] = p = new SessionPartials();
    return p;
  }

  /** The number of the entry of (the keys src[k0 .. k0 + nk), slice), created empty on first use. */
  private int entry(Object[] src, int k0, int nk, long slice) {
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
    long high = h & HIGH;
    long[] t = this.t;
    int mask = t.length / STRIDE - 1;
    for (int i = (int) (h >>> 32) & mask; ; i = (i + 1) & mask) {
      int at = i * STRIDE;
      long word = t[at];
      if (word == 0) {
        int e = size;
        t[at] = high | (e + 1);
        t[at + 1] = slice;
        t[at + 2] = packA;
        t[at + 3] = packB;
        words[e * 3] = slice;
        words[e * 3 + 1] = packA;
        words[e * 3 + 2] = packB;
        keys[e] = packed && LITTLE_ENDIAN && src[k0] instanceof UTF8String ? null : copyKeys(src, k0, nk);
        if (accs != null) {
          Acc[] a = new Acc[na];
          for (int j = 0; j < na; j++) a[j] = new Acc();
          accs[e] = a;
        }
        if (++size * 2 > t.length / STRIDE) grow();
        return e;
      }
      if ((word & HIGH) == high && t[at + 1] == slice && t[at + 2] == packA && t[at + 3] == packB
          && (packed || sameKeys(keys[(int) word - 1], src, k0))) {
        return (int) word - 1;
      }
    }
  }

  private static Object[] copyKeys(Object[] src, int k0, int nk) {
    Object[] keys = Arrays.copyOfRange(src, k0, k0 + nk);
    for (int i = 0; i < nk; i++) {
      // a copy: the row's UTF8String points into a buffer Spark reuses for the next row
      if (keys[i] instanceof UTF8String) keys[i] = ((UTF8String) keys[i]).clone();
    }
    return keys;
  }

  /** Doubles the table (the slots; the entries' arrays keep their numbers). */
  private void grow() {
    long[] old = t;
    t = new long[old.length * 2];
    int mask = t.length / STRIDE - 1;
    for (int at = 0; at < old.length; at += STRIDE) {
      if (old[at] == 0) continue;
      int j = (int) (old[at] >>> 32) & mask;
      while (t[j * STRIDE] != 0) j = (j + 1) & mask;
      System.arraycopy(old, at, t, j * STRIDE, STRIDE);
    }
    int entries = t.length / STRIDE / 2 + 1;
    words = Arrays.copyOf(words, entries * 3);
    keys = Arrays.copyOf(keys, entries);
    if (sessions != null) sessions = Arrays.copyOf(sessions, entries);
    if (numbers != null) numbers = Arrays.copyOf(numbers, entries * width);
    if (accs != null) accs = Arrays.copyOf(accs, entries);
  }

  int size() {
    return size;
  }

  /** Every entry, in the order they came; the table is empty afterwards. */
  List<Entry> drain() {
    List<Entry> out = new ArrayList<>(size);
    for (int e = 0; e < size; e++) {
      Acc[] a = null;
      if (numbers != null) {
        a = new Acc[na];
        for (int i = 0, at = e * width; i < na; at += accWords[i], i++) {
          a[i] = new Acc();
          a[i].load(numbers, at, accWords[i]);
        }
      } else if (accs != null) {
        a = accs[e];
      }
      Object[] k = keys[e] != null ? keys[e] : new Object[] {unpackText(words[e * 3 + 1], words[e * 3 + 2])};
      out.add(new Entry(words[e * 3], k, a, sessions == null ? null : sessions[e]));
    }
    allocate(16);
    return out;
  }

  /** The text a UTF8String packed into (a, b) on a little-endian machine (see pack). */
  private static UTF8String unpackText(long a, long b) {
    int n = (int) (b >>> 56);
    byte[] bytes = new byte[n];
    for (int i = 0; i < n; i++) bytes[i] = (byte) (i < 8 ? a >>> (8 * i) : b >>> (8 * (i - 8)));
    return UTF8String.fromBytes(bytes);
  }
}
