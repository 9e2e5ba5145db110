/*
 * Faults fired inside Spark's own checkpoint code, at a named operation on a named path: the fault plan of one
 * query run, read from the Hadoop configuration by every LatencyFileSystem instance (spark_impl/native/
 * fault_plan.py writes it; the query gets it as Spark SQL confs, which Spark copies into the Hadoop
 * configuration of its checkpoint file managers and of every state store).
 *
 * A rule names an operation ("create": from the create call, "before", to the close of its stream, "after";
 * "rename": before or after the rename) and a regular expression that the operation's target must match: the
 * local absolute path of the file Spark means. CheckpointFileManager.createAtomic writes a temporary file
 * ".<name>.<uuid>[.TID<n>].tmp" beside the file and renames it; a create is matched by the name it stands for
 * (the temporary decoration removed), a rename by its destination. What a rule does:
 *   driver_crash   Runtime.halt(HALT_STATUS) in this JVM: no shutdown hook, no finally block, no stream is
 *                  closed or cancelled, so what is on disk is exactly what a killed process leaves (a temporary
 *                  file that was never renamed included). On a local master the executors live in the driver's
 *                  JVM, so a rule matched by a task's state file write halts the driver too.
 *   executor_loss  the same halt, in the JVM of the executor whose task reached the operation (a cluster; the
 *                  adapter refuses it on a local master, where it would be the driver's JVM).
 *   storage_write_error  an IOException, as S3A's failed PUT raises one (before: nothing is written; after a
 *                  create: the bytes are in the temporary file and its close fails; after a rename: the file
 *                  is in place and the rename still reports a failure).
 *   storage_latency  a sleep of ms milliseconds on that one operation, on top of the run's profile.
 * Each rule fires once across every JVM of the run: it is claimed by creating marks/fault-<index> exclusively
 * (a rule whose mark exists does nothing), and the mark records where it fired, written and forced to disk
 * before the fault acts.
 *
 * Configuration:
 *   lightspeed.latencyfs.faults        the rules' indexes (the scenario's fault indexes), comma-separated
 *   lightspeed.latencyfs.fault.<i>     "<kind>|<op>|<when>|<ms>|<regex>"
 *   lightspeed.latencyfs.marks         the directory of the marks (local, outside the checkpoint)
 */
package lightspeed.checkpointfs;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import org.apache.hadoop.conf.Configuration;

final class FaultPlan {
  static final String FAULTS = LatencyFileSystem.PREFIX + "faults";
  static final String FAULT = LatencyFileSystem.PREFIX + "fault.";
  static final String MARKS = LatencyFileSystem.PREFIX + "marks";
  static final String[] KINDS = {"driver_crash", "executor_loss", "storage_write_error", "storage_latency"};
  static final String[] OPS = {"create", "rename"};
  static final String[] WHENS = {"before", "after"};
  // ".<name>.<uuid>[.TID<n>].tmp": CheckpointFileManager's temporary file for <name>
  private static final Pattern TEMPORARY =
      Pattern.compile("^\\.(.+)\\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
          + "(\\.TID\\d+)?\\.tmp$");

  static final FaultPlan EMPTY = new FaultPlan(new ArrayList<>(), null);

  static final class Rule {
    final int index;
    final String kind, op, when;
    final long ms;
    final Pattern target;

    Rule(int index, String kind, String op, String when, long ms, Pattern target) {
      this.index = index;
      this.kind = kind;
      this.op = op;
      this.when = when;
      this.ms = ms;
      this.target = target;
    }
  }

  final List<Rule> rules;
  final String marks;

  private FaultPlan(List<Rule> rules, String marks) {
    this.rules = rules;
    this.marks = marks;
  }

  boolean isEmpty() {
    return rules.isEmpty();
  }

  private static String oneOf(String value, String[] allowed, String what, String key) throws IOException {
    for (String a : allowed) {
      if (a.equals(value)) {
        return a;
      }
    }
    throw new IOException(key + ": " + what + " '" + value + "' is not one of " + String.join(", ", allowed));
  }

  /** The plan in ``conf``; an IOException naming the key of a malformed rule. */
  static FaultPlan of(Configuration conf) throws IOException {
    String indexes = conf.get(FAULTS, "").trim();
    if (indexes.isEmpty()) {
      return EMPTY;
    }
    String marks = conf.get(MARKS);
    if (marks == null || marks.isEmpty()) {
      throw new IOException(FAULTS + " names faults but " + MARKS + " (where a fired fault is marked) is not set");
    }
    List<Rule> rules = new ArrayList<>();
    for (String item : indexes.split(",")) {
      String key = FAULT + item.trim();
      int index;
      try {
        index = Integer.parseInt(item.trim());
      } catch (NumberFormatException e) {
        throw new IOException(FAULTS + ": '" + item + "' is not a fault index");
      }
      String text = conf.get(key);
      if (text == null) {
        throw new IOException(FAULTS + " names fault " + index + " but " + key + " is not set");
      }
      String[] parts = text.split("\\|", 5);
      if (parts.length != 5) {
        throw new IOException(key + ": expected kind|op|when|ms|regex, got '" + text + "'");
      }
      long ms;
      try {
        ms = Long.parseLong(parts[3]);
      } catch (NumberFormatException e) {
        throw new IOException(key + ": ms '" + parts[3] + "' is not a whole number");
      }
      Pattern target;
      try {
        target = Pattern.compile(parts[4]);
      } catch (PatternSyntaxException e) {
        throw new IOException(key + ": the target is not a regular expression: " + e.getMessage());
      }
      rules.add(new Rule(index, oneOf(parts[0], KINDS, "kind", key), oneOf(parts[1], OPS, "operation", key),
                         oneOf(parts[2], WHENS, "when", key), ms, target));
    }
    return new FaultPlan(rules, marks);
  }

  /** The file a created path stands for: CheckpointFileManager's temporary file without its decoration. */
  static String targetOfCreate(String localPath) {
    int slash = localPath.lastIndexOf('/');
    String name = localPath.substring(slash + 1);
    Matcher m = TEMPORARY.matcher(name);
    return m.matches() ? localPath.substring(0, slash + 1) + m.group(1) : localPath;
  }

  /** Fire every rule for ``op`` at ``when`` whose target ``target`` matches, each once across the run. */
  void fire(String op, String when, String target, String localPath) throws IOException {
    for (Rule rule : rules) {
      if (!rule.op.equals(op) || !rule.when.equals(when) || !rule.target.matcher(target).matches()) {
        continue;
      }
      String where = when + " " + op + " of " + target;
      if (rule.kind.equals("executor_loss") && !FaultMarks.inExecutor()) {
        continue;   // an executor's loss, never the driver's: the operation ran in the driver's JVM
      }
      if (!FaultMarks.claimRule(marks, rule.index, rule.kind, op, when, target, localPath)) {
        continue;   // fired already, in this JVM or an earlier one
      }
      switch (rule.kind) {
        case "driver_crash":
        case "executor_loss":
          LatencyFileSystem.saveReports(marks);
          FaultMarks.halt();
          break;
        case "storage_write_error":
          throw new IOException("injected storage_write_error (faults[" + rule.index + "]) " + where
              + ": the store refused the request, as S3A's failed PUT does");
        case "storage_latency":
          try {
            Thread.sleep(rule.ms);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted in the injected storage_latency of faults["
                + rule.index + "] " + where);
          }
          break;
        default:
          throw new IllegalStateException("unknown fault kind " + rule.kind);
      }
    }
  }
}
