/*
 * The stat sink of native Spark runs (spark_impl/native/stat_sink.py): a foreach writer that notes the wall
 * time at which it processes each row, keyed by the row's identity columns, and writes them when its task
 * closes to <directory>/e<epoch>-p<partition>-n<rows>-<id>.tsv (tab-separated identity values, then the time
 * in seconds since the epoch). It runs in the executor's JVM, as the published benchmark's stat sink did, so
 * it adds no Python worker to a batch; Spark accepts it under asynchronous progress tracking (the sink's name
 * is ForeachSink). A failed task writes nothing: its retry processes the rows again.
 */
package lightspeed.stat;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.Locale;
import java.util.UUID;

import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

public class StatSink extends ForeachWriter<Row> {
  private static final long serialVersionUID = 1L;

  private final String directory;
  private final String[] columns;
  private transient long epoch;
  private transient long partition;
  private transient StringBuilder rows;
  private transient long count;

  public StatSink(String directory, String[] columns) {
    this.directory = directory;
    this.columns = columns.clone();
  }

  @Override
  public boolean open(long partitionId, long epochId) {
    partition = partitionId;
    epoch = epochId;
    rows = new StringBuilder();
    count = 0;
    return true;
  }

  @Override
  public void process(Row row) {
    for (String column : columns) {
      Object value = row.get(row.fieldIndex(column));
      rows.append(((Number) value).longValue()).append('\t');
    }
    Instant now = Instant.now();
    rows.append(now.getEpochSecond()).append('.').append(String.format(Locale.ROOT, "%09d", now.getNano())).append('\n');
    count++;
  }

  @Override
  public void close(Throwable error) {
    if (error != null || rows == null) {
      return;
    }
    String name = "e" + epoch + "-p" + partition + "-n" + count + "-"
        + UUID.randomUUID().toString().replace("-", "").substring(0, 12) + ".tsv";
    File partial = new File(directory, "." + name + ".tmp");
    try (Writer out = new OutputStreamWriter(new FileOutputStream(partial), StandardCharsets.UTF_8)) {
      out.write(rows.toString());
    } catch (IOException e) {
      throw new RuntimeException("stat sink: cannot write " + partial + ": " + e.getMessage(), e);
    }
    try {
      Files.move(partial.toPath(), new File(directory, name).toPath(), StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new RuntimeException("stat sink: cannot publish " + name + ": " + e.getMessage(), e);
    }
  }
}
