/*
 * The marks of the faults that fired in one run: a file per fault in a local directory outside the checkpoint,
 * created exclusively, so a fault fires once across every thread and every JVM of the run (a driver that was
 * halted and its successor, the executors of a cluster on this host). A mark holds where the fault fired, as
 * one line of JSON, forced to disk before the fault acts.
 *
 * Also the static entry points Spark SQL's reflect() calls from inside a task (plan.py): claim() marks a
 * task_failure fired (null the first time, as java.lang.System.setProperty returns for a new property), and
 * loseExecutor() halts the executor's JVM the first time.
 */
package lightspeed.checkpointfs;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Method;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

public final class FaultMarks {
  /** The exit status of a JVM halted by a fault: the adapter tells it from any other death of the JVM. */
  public static final int HALT_STATUS = 86;

  private FaultMarks() {
  }

  static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  /** Create ``dir/name`` exclusively with ``line``, forced to disk; false when it exists (claimed before). */
  static boolean create(String dir, String name, String line) {
    Path path = Paths.get(dir, name);
    try {
      Files.createDirectories(path.getParent());
      Files.createFile(path);
    } catch (FileAlreadyExistsException e) {
      return false;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot mark a fault in " + dir, e);
    }
    try (FileChannel ch = FileChannel.open(path, StandardOpenOption.WRITE)) {
      ch.write(java.nio.ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8)));
      ch.force(true);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the mark " + path, e);
    }
    return true;
  }

  static String read(String dir, String name) {
    try {
      return new String(Files.readAllBytes(Paths.get(dir, name)), StandardCharsets.UTF_8).trim();
    } catch (IOException e) {
      return "";   // being written by the JVM that claimed it
    }
  }

  /** Where this thread is: the JVM's pid, the thread, and (in a task) Spark's executor, stage, partition and
   *  attempt, read by reflection (this jar compiles against no Spark core class). */
  static String context() {
    StringBuilder out = new StringBuilder();
    out.append("\"pid\":").append(ProcessHandle.current().pid())
        .append(",\"thread\":").append(quote(Thread.currentThread().getName()))
        .append(",\"time_ms\":").append(System.currentTimeMillis());
    Object task = call("org.apache.spark.TaskContext", null, "get");
    if (task != null) {
      for (String field : new String[] {"stageId", "partitionId", "attemptNumber", "taskAttemptId"}) {
        out.append(",\"").append(field).append("\":").append(call("org.apache.spark.TaskContext", task, field));
      }
    }
    Object env = call("org.apache.spark.SparkEnv$", module("org.apache.spark.SparkEnv$"), "get");
    Object executor = field("org.apache.spark.SparkEnv", env, "executorId");
    if (executor != null) {
      out.append(",\"executor\":").append(quote(String.valueOf(executor)));
    }
    return out.toString();
  }

  // Spark's classes are read by reflection, one member at a time: this jar compiles against no Spark core class,
  // and Class.getMethod resolves every public signature of a class, some of which (SparkEnv's) name classes that
  // are not on the driver's class path

  /** The Scala object ``name`` (its MODULE$ field), or null outside Spark. */
  private static Object module(String name) {
    try {
      return Class.forName(name).getField("MODULE$").get(null);
    } catch (ReflectiveOperationException | LinkageError e) {
      return null;
    }
  }

  /** ``target.method()`` (a static method when ``target`` is null) of class ``cls``, or null. */
  private static Object call(String cls, Object target, String method) {
    try {
      for (Method m : Class.forName(cls).getDeclaredMethods()) {
        if (m.getName().equals(method) && m.getParameterCount() == 0) {
          m.setAccessible(true);
          return m.invoke(target);
        }
      }
    } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
      return null;
    }
    return null;
  }

  /** The field ``name`` of ``target`` (of class ``cls``), or null. */
  private static Object field(String cls, Object target, String name) {
    if (target == null) {
      return null;
    }
    try {
      java.lang.reflect.Field f = Class.forName(cls).getDeclaredField(name);
      f.setAccessible(true);
      return f.get(target);
    } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
      return null;
    }
  }

  /** Claim fault ``index`` of a plan's rule at an operation; false when it fired before. */
  static boolean claimRule(String dir, int index, String kind, String op, String when, String target,
                           String localPath) {
    String line = "{\"fault\":" + index + ",\"kind\":" + quote(kind) + ",\"op\":" + quote(op) + ",\"when\":"
        + quote(when) + ",\"path\":" + quote(target) + ",\"local\":" + quote(localPath) + "," + context() + "}";
    return create(dir, "fault-" + index, line);
  }

  /** Spark SQL's reflect() from a task: mark ``name`` with ``detail``; null the first time, else the mark. */
  public static String claim(String dir, String name, String detail) {
    String line = "{\"detail\":" + quote(detail) + "," + context() + "}";
    return create(dir, name, line) ? null : read(dir, name);
  }

  /** Spark SQL's reflect() from a task: the first time a task of micro-batch ``batch`` runs it in an executor's
   *  JVM (not the driver's), mark ``name`` and halt that JVM; "" while it has not fired, else the mark. */
  public static String loseExecutor(String dir, String name, String batch) {
    Object task = call("org.apache.spark.TaskContext", null, "get");
    if (task == null || !batch.equals(localProperty(task, BATCH_ID_KEY)) || !inExecutor()) {
      return "";
    }
    if (create(dir, name, "{\"detail\":" + quote("batch " + batch) + "," + context() + "}")) {
      LatencyFileSystem.saveReports(dir);
      halt();
    }
    return read(dir, name);
  }

  // the task's local property that names its micro-batch (MicroBatchExecution.BATCH_ID_KEY)
  static final String BATCH_ID_KEY = "streaming.sql.batchId";

  /** Whether this JVM is an executor's and not the driver's (SparkEnv's executorId is "driver" there). */
  static boolean inExecutor() {
    Object env = call("org.apache.spark.SparkEnv$", module("org.apache.spark.SparkEnv$"), "get");
    Object executor = field("org.apache.spark.SparkEnv", env, "executorId");
    return executor != null && !"driver".equals(String.valueOf(executor));
  }

  /** TaskContext.getLocalProperty(key), or null. */
  private static String localProperty(Object task, String key) {
    try {
      for (Method m : Class.forName("org.apache.spark.TaskContext").getDeclaredMethods()) {
        if (m.getName().equals("getLocalProperty") && m.getParameterCount() == 1) {
          Object value = m.invoke(task, key);
          return value == null ? null : String.valueOf(value);
        }
      }
    } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
      return null;
    }
    return null;
  }

  /** Halt this JVM as a crash does: no shutdown hook runs, no stream is closed. */
  static void halt() {
    Runtime.getRuntime().halt(HALT_STATUS);
  }
}
