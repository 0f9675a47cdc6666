package eventtime.jvm.operator;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.MapState;

/**
 * One user key's SQL buffer entries ({@link Slices.Buffers}) in the operator's map state
 * {@code buffers}, keyed by the user key and the slice's start ({@link Layout#bufferKeySchema}).
 */
final class SliceBuffers implements Slices.Buffers {
  private final MapState<Row, byte[]> state;
  private final Row key;

  SliceBuffers(MapState<Row, byte[]> state, Row key) {
    this.state = state;
    this.key = key;
  }

  private Row entry(long slice) {
    Object[] kv = new Object[key.length() + 1];
    for (int i = 0; i < key.length(); i++) kv[i] = key.get(i);
    kv[key.length()] = slice;
    return RowFactory.create(kv);
  }

  @Override
  public byte[] get(long slice) {
    return state.getValue(entry(slice));
  }

  @Override
  public void put(long slice, byte[] bytes) {
    state.updateValue(entry(slice), bytes);
  }

  @Override
  public void remove(long slice) {
    state.removeKey(entry(slice));
  }
}
