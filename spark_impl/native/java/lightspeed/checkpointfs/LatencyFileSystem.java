/*
 * A Hadoop FileSystem for Spark's own Structured Streaming checkpoint that takes as long as a modelled store:
 * the local filesystem (RawLocalFileSystem: no checksum files) under its own scheme, lslatency://<run>/<path>
 * standing for the local <path>, that sleeps each operation's latency after doing it. The latencies are those
 * of reference/protocol/storage_profiles.py, drawn by LatencyDraws (its Java twin) on two streams, "<seed>/driver" and
 * "<seed>/executor", as the Spark engine's checkpoint storage draws them.
 *
 * Spark reaches it through every path it writes a checkpoint by: CheckpointFileManager (offsets/, commits/,
 * metadata, the state stores' changelog and snapshot files; the FileContext API needs an AbstractFileSystem
 * for the scheme, so CheckpointFileManager.create falls back to FileSystemBasedCheckpointFileManager, whose
 * createAtomic is a create of a temporary file and a rename, as on HDFS or S3A) and RocksDBFileManager's own
 * FileSystem calls (copyFromLocalFile of SST files, unzips, listings, deletes).
 *
 * What is charged, per call made from outside this class (a call Hadoop's local filesystem makes inside one of
 * these, such as the existence check inside create, is part of it and charged nothing):
 *   create / createNonRecursive  "create" with the bytes written, when the stream is closed
 *   rename                       "rename"
 *   delete                       "delete" (a missing path too: the request was made)
 *   listStatus                   "list"
 *   exists, getFileStatus        "exists" (a missing path too: a HEAD that answers 404 costs a round trip)
 *   open                         "read" with the file's length
 * mkdirs, setPermission and the like are free (an object store has no directories).
 *
 * Configuration (Hadoop keys, given to a query as Spark SQL confs; spark_impl/native/checkpoint_fs.py):
 *   lightspeed.latencyfs.<field>  each field of the profile (LatencyDraws.PROFILE_FIELDS)
 *   lightspeed.latencyfs.seed     the scenario's seed
 *   lightspeed.latencyfs.root     the local path of the checkpoint: a path under <root>/state/ draws from the
 *                                 executor stream, any other from the driver stream
 *   lightspeed.latencyfs.free     top-level folders of the checkpoint that pay nothing (comma-separated)
 *   lightspeed.latencyfs.latency  "off": no profile (operations are counted and cost nothing; a run that only
 *                                 needs the fault plan); any other value or none: the profile's fields apply
 * A path outside the checkpoint root (the adapter's sink, when it writes through this filesystem) pays nothing.
 *
 * Faults: the fault plan of FaultPlan.java (lightspeed.latencyfs.faults and the rules it names) fires at the
 * create and the rename of the paths it names, in every instance; Hadoop's FileSystem cache is turned off for
 * the scheme (fs.lslatency.impl.disable.cache), so each query run's instances read its own plan.
 * The sequence numbers, the sleeps and the report belong to the run (the URI's authority), shared by every
 * instance Hadoop makes for it in this JVM.
 */
package lightspeed.checkpointfs;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

public class LatencyFileSystem extends RawLocalFileSystem {
  public static final String SCHEME = "lslatency";
  public static final String PREFIX = "lightspeed.latencyfs.";
  // the thread name of Spark's asynchronous offset and commit log writes
  // (AsyncProgressTrackingMicroBatchExecution.ASYNC_LOG_WRITE_THREAD_NAME)
  static final String ASYNC_LOG_WRITER = "async-log-write";

  private static final ConcurrentHashMap<String, Run> RUNS = new ConcurrentHashMap<>();
  private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

  private URI uri;
  private Run run;
  private FaultPlan plan = FaultPlan.EMPTY;

  /** One run's draws and what its operations cost, per stream and kind. */
  static final class Run {
    final String authority, seed, root;
    final Set<String> free = new HashSet<>();
    final LatencyDraws.Profile profile;
    final Map<String, LatencyDraws> draws = new HashMap<>();
    final Map<String, double[]> cost = new TreeMap<>();   // "stream/folder/kind" -> {count, ms, bytes}
    // the same keys, counting the operations made on Spark's asynchronous log writer: under asynchronous
    // progress tracking the offset and commit logs are written there, off the query's thread
    final Map<String, Long> onAsyncLogWriter = new TreeMap<>();
    long freeOperations;

    Run(String authority, Configuration conf) throws IOException {
      this.authority = authority;
      this.seed = required(conf, "seed");
      this.root = stripSlash(required(conf, "root"));
      for (String name : conf.get(PREFIX + "free", "").split(",")) {
        if (!name.trim().isEmpty()) {
          free.add(name.trim());
        }
      }
      if ("off".equals(conf.get(PREFIX + "latency"))) {
        this.profile = null;
        return;
      }
      Map<String, Double> values = new HashMap<>();
      for (String field : LatencyDraws.PROFILE_FIELDS) {
        try {
          values.put(field, Double.parseDouble(required(conf, field)));
        } catch (NumberFormatException e) {
          throw new IOException(SCHEME + "://" + authority + ": " + PREFIX + field + " is not a number: "
              + conf.get(PREFIX + field));
        }
      }
      try {
        this.profile = new LatencyDraws.Profile(values);
      } catch (IllegalArgumentException e) {
        throw new IOException(SCHEME + "://" + authority + ": " + e.getMessage());
      }
      for (String stream : new String[] {"driver", "executor"}) {
        draws.put(stream, new LatencyDraws(profile, seed + "/" + stream));
      }
    }

    private String required(Configuration conf, String key) throws IOException {
      String value = conf.get(PREFIX + key);
      if (value == null) {
        throw new IOException(SCHEME + "://" + authority + ": the Hadoop configuration has no " + PREFIX + key
            + " (a query on this filesystem is given the profile, seed and root as Spark SQL confs before it "
            + "starts: spark_impl/native/checkpoint_fs.py)");
      }
      return value;
    }

    /** The first name of a local path under the checkpoint (a folder, or a top-level file such as metadata,
     *  whose temporary ".metadata.<uuid>.tmp" counts as "metadata"); "" for the root or a path outside it. */
    String folderOf(String localPath) {
      String path = stripSlash(localPath);
      if (!path.startsWith(root + "/")) {
        return path.equals(root) ? "" : OUTSIDE;
      }
      String rest = path.substring(root.length() + 1);
      int slash = rest.indexOf('/');
      String first = slash < 0 ? rest : rest.substring(0, slash);
      if (slash < 0 && first.startsWith(".") && first.endsWith(".tmp") && first.indexOf('.', 1) > 1) {
        first = first.substring(1, first.indexOf('.', 1));
      }
      return first;
    }

    /** Draw, account and sleep one operation on ``localPath``. */
    void charge(String kind, String localPath, long sizeBytes) throws IOException {
      String folder = folderOf(localPath);
      double ms;
      synchronized (this) {
        if (free.contains(folder) || folder.equals(OUTSIDE)) {
          freeOperations++;
          return;
        }
        String stream = folder.equals("state") ? "executor" : "driver";
        ms = profile == null ? 0.0 : draws.get(stream).draw(kind, sizeBytes);
        String key = stream + "/" + (folder.isEmpty() ? "-" : folder) + "/" + kind;
        double[] c = cost.computeIfAbsent(key, k -> new double[3]);
        c[0] += 1;
        c[1] += ms;
        c[2] += sizeBytes;
        if (Thread.currentThread().getName().startsWith(ASYNC_LOG_WRITER)) {
          onAsyncLogWriter.merge(key, 1L, Long::sum);
        }
      }
      if (profile == null) {
        return;
      }
      long millis = (long) ms;
      int nanos = (int) Math.min(999_999, Math.round((ms - millis) * 1e6));
      try {
        Thread.sleep(millis, nanos);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted while " + SCHEME + " slept " + kind + " of " + localPath);
      }
    }

    synchronized String report() {
      StringBuilder out = new StringBuilder();
      out.append("{\"run\":\"").append(authority).append("\",\"seed\":\"").append(seed)
          .append("\",\"free_operations\":").append(freeOperations).append(",\"operations\":{");
      boolean first = true;
      for (Map.Entry<String, double[]> e : cost.entrySet()) {
        double[] c = e.getValue();
        out.append(first ? "" : ",").append('"').append(e.getKey()).append("\":{\"count\":").append((long) c[0])
            .append(",\"ms\":").append(String.format(Locale.ROOT, "%.6f", c[1]))
            .append(",\"bytes\":").append((long) c[2]).append('}');
        first = false;
      }
      out.append("},\"async_log_write\":{");
      first = true;
      for (Map.Entry<String, Long> e : onAsyncLogWriter.entrySet()) {
        out.append(first ? "" : ",").append('"').append(e.getKey()).append("\":").append(e.getValue());
        first = false;
      }
      return out.append("}}").toString();
    }
  }

  // folderOf's answer for a path outside the checkpoint root
  static final String OUTSIDE = "<outside>";

  private static String stripSlash(String path) {
    return path.endsWith("/") && path.length() > 1 ? path.substring(0, path.length() - 1) : path;
  }

  /** What a run's operations cost so far, as JSON; null for a run this JVM has not seen. */
  public static String report(String authority) {
    Run run = RUNS.get(authority);
    return run == null ? null : run.report();
  }

  /** Write every run's report so far to ``dir``/costs-<pid>-<run>.json: a JVM about to be halted by a fault
   *  leaves what its operations cost (the adapter adds them to its successor's). */
  static void saveReports(String dir) {
    long pid = ProcessHandle.current().pid();
    for (Map.Entry<String, Run> e : RUNS.entrySet()) {
      try {
        Files.write(Paths.get(dir, "costs-" + pid + "-" + e.getKey() + ".json"),
                    e.getValue().report().getBytes(StandardCharsets.UTF_8));
      } catch (IOException ignored) {
        // the costs of a halted JVM are a measurement, not the checkpoint: lose them rather than not halt
      }
    }
  }

  /** Forget a run (its report has been read). */
  public static void forget(String authority) {
    RUNS.remove(authority);
  }

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    super.initialize(name, conf);
    String authority = name.getAuthority();
    if (authority == null || authority.isEmpty()) {
      throw new IOException(SCHEME + " paths name their run: " + SCHEME + "://<run>/<local path>; got " + name);
    }
    uri = URI.create(SCHEME + "://" + authority);
    Run found = RUNS.get(authority);
    if (found == null) {
      Run made = new Run(authority, conf);
      found = RUNS.putIfAbsent(authority, made);
      found = found == null ? made : found;
    }
    run = found;
    plan = FaultPlan.of(conf);
    setWorkingDirectory(new Path(uri.toString() + stripSlash(System.getProperty("user.dir"))));
  }

  @Override
  public URI getUri() {
    return uri != null ? uri : URI.create(SCHEME + ":///");   // the superclass asks before initialize
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  // ------------------------------------------------------------------ charging

  private interface IOCall<T> {
    T call() throws IOException;
  }

  /** Run ``op`` as part of a call already charged (or to be charged later): nested calls are free. */
  private static <T> T inner(IOCall<T> op) throws IOException {
    int[] depth = DEPTH.get();
    depth[0]++;
    try {
      return op.call();
    } finally {
      depth[0]--;
    }
  }

  private static boolean outermost() {
    return DEPTH.get()[0] == 0;
  }

  private String local(Path path) {
    return pathToFile(path).getAbsolutePath();
  }

  /** ``op``, then (for a call from outside) its charge; a failed operation costs nothing. */
  private <T> T charged(String kind, Path path, IOCall<T> op) throws IOException {
    if (!outermost()) {
      return op.call();
    }
    T out = inner(op);
    run.charge(kind, local(path), 0L);
    return out;
  }

  /** As ``charged``, and a path found missing is charged too (the request was made). */
  private <T> T chargedEvenIfMissing(String kind, Path path, IOCall<T> op) throws IOException {
    if (!outermost()) {
      return op.call();
    }
    try {
      T out = inner(op);
      run.charge(kind, local(path), 0L);
      return out;
    } catch (FileNotFoundException e) {
      run.charge(kind, local(path), 0L);
      throw e;
    }
  }

  /** A created file's stream: its close charges "create" with the bytes written, then fires the plan's faults
   *  after the create of the file it stands for. */
  private FSDataOutputStream pricedOnClose(Path path, FSDataOutputStream out) throws IOException {
    if (!outermost()) {
      return out;
    }
    final String file = local(path);
    final String target = FaultPlan.targetOfCreate(file);
    OutputStream counting = new OutputStream() {
      private long bytes;
      private boolean closed;

      @Override
      public void write(int b) throws IOException {
        out.write(b);
        bytes++;
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        out.write(b, off, len);
        bytes += len;
      }

      @Override
      public void flush() throws IOException {
        out.flush();
      }

      @Override
      public void close() throws IOException {
        if (closed) {
          return;
        }
        closed = true;
        out.close();
        run.charge("create", file, bytes);
        plan.fire("create", "after", target, file);
      }
    };
    return new FSDataOutputStream(counting, null);
  }

  private interface CreateCall {
    FSDataOutputStream call() throws IOException;
  }

  /** A create from outside: the plan's faults before it, then the stream that charges and fires on close. */
  private FSDataOutputStream created(Path f, CreateCall op) throws IOException {
    if (outermost()) {
      String file = local(f);
      plan.fire("create", "before", FaultPlan.targetOfCreate(file), file);
    }
    return pricedOnClose(f, inner(op::call));
  }

  // ------------------------------------------------------------------ the operations

  @Override
  public FSDataOutputStream create(Path f, boolean overwrite, int bufferSize, short replication, long blockSize,
                                   Progressable progress) throws IOException {
    return created(f, () -> super.create(f, overwrite, bufferSize, replication, blockSize, progress));
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                   short replication, long blockSize, Progressable progress) throws IOException {
    return created(f, () -> super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress));
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, EnumSet<CreateFlag> flags,
                                               int bufferSize, short replication, long blockSize,
                                               Progressable progress) throws IOException {
    return created(f, () -> super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize,
                                                     progress));
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                               short replication, long blockSize, Progressable progress)
      throws IOException {
    return created(f, () -> super.createNonRecursive(f, permission, overwrite, bufferSize, replication, blockSize,
                                                     progress));
  }

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    if (!outermost()) {
      return super.open(f, bufferSize);
    }
    FSDataInputStream in = inner(() -> super.open(f, bufferSize));
    File file = pathToFile(f);
    run.charge("read", file.getAbsolutePath(), file.length());
    return in;
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    if (!outermost()) {
      return super.rename(src, dst);
    }
    String target = local(dst);
    plan.fire("rename", "before", target, target);
    boolean done = charged("rename", src, () -> super.rename(src, dst));
    plan.fire("rename", "after", target, target);
    return done;
  }

  @Override
  public boolean delete(Path p, boolean recursive) throws IOException {
    return charged("delete", p, () -> super.delete(p, recursive));
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    return chargedEvenIfMissing("list", f, () -> super.listStatus(f));
  }

  @Override
  public boolean exists(Path f) throws IOException {
    return charged("exists", f, () -> super.exists(f));
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    return chargedEvenIfMissing("exists", f, () -> super.getFileStatus(f));
  }
}
