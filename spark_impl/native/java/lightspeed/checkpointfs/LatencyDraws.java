/*
 * The seeded per-operation latencies of a checkpoint-storage profile: the Java twin of
 * reference/protocol/storage_profiles.py (fnv1a64, splitmix64, unit_uniform, exact_log, exact_exp,
 * normal_quantile, jitter_factor, operation_ms, LatencyDraws). Both compute the same IEEE operations in
 * the same order, so the same (stream, kind, sequence number) gives the same latency to the bit in the
 * simulator, the Spark engine and native Spark's checkpoint filesystem (LatencyFileSystem).
 *
 * Standalone use prints a test vector (tests/spark/test_native_checkpoint_fs.py compares it with Python's):
 *   java -cp <jar> lightspeed.checkpointfs.LatencyDraws <stream> <name=value,...> <kind:bytes>...
 * one line per operation: kind, bytes, the latency in ms, and its IEEE 754 bits in hex.
 */
package lightspeed.checkpointfs;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

public final class LatencyDraws {
  public static final String[] KINDS = {"create", "rename", "read", "exists", "list", "delete"};
  public static final String[] PROFILE_FIELDS = {
    "small_write_ms", "rename_ms", "list_ms", "delete_ms", "read_ms", "bandwidth_mb_per_s", "jitter_sigma"};

  private static final long FNV_OFFSET = 0xCBF29CE484222325L;
  private static final long FNV_PRIME = 0x100000001B3L;
  private static final long GOLDEN_GAMMA = 0x9E3779B97F4A7C15L;
  private static final double LN2 = 0.6931471805599453;
  private static final double SQRT_HALF = 0.7071067811865476;
  private static final int LOG_TERMS = 14;
  private static final int EXP_TERMS = 18;
  private static final double[] A = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
    1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  private static final double[] B = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
    6.680131188771972e+01, -1.328068155288572e+01};
  private static final double[] C = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
    -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  private static final double[] D = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
    3.754408661907416e+00};
  private static final double LOW = 0.02425;

  /** A storage profile's parameters (reference.protocol.storage_profiles.StorageProfile), in ms and MB/s. */
  public static final class Profile {
    final double smallWriteMs, renameMs, listMs, deleteMs, readMs, bandwidthMbPerS, jitterSigma;

    public Profile(Map<String, Double> values) {
      for (String field : PROFILE_FIELDS) {
        Double v = values.get(field);
        if (v == null || v.isNaN() || v.isInfinite() || v < 0) {
          throw new IllegalArgumentException("storage profile " + field + ": expected a finite number >= 0, got "
              + v);
        }
      }
      smallWriteMs = values.get("small_write_ms");
      renameMs = values.get("rename_ms");
      listMs = values.get("list_ms");
      deleteMs = values.get("delete_ms");
      readMs = values.get("read_ms");
      bandwidthMbPerS = values.get("bandwidth_mb_per_s");
      jitterSigma = values.get("jitter_sigma");
      if (bandwidthMbPerS <= 0) {
        throw new IllegalArgumentException("storage profile bandwidth_mb_per_s: must be > 0");
      }
    }

    /** "name=value,..." with every field of PROFILE_FIELDS. */
    public static Profile parse(String text) {
      Map<String, Double> values = new HashMap<>();
      for (String item : text.split(",")) {
        String[] kv = item.split("=", 2);
        if (kv.length != 2) {
          throw new IllegalArgumentException("storage profile: expected name=value, got '" + item + "'");
        }
        values.put(kv[0].trim(), Double.parseDouble(kv[1].trim()));
      }
      return new Profile(values);
    }

    double transferMs(long sizeBytes) {
      return (double) sizeBytes / (bandwidthMbPerS * 1e6) * 1000.0;
    }
  }

  static long fnv1a64(byte[] data) {
    long h = FNV_OFFSET;
    for (byte b : data) {
      h = (h ^ (b & 0xFF)) * FNV_PRIME;
    }
    return h;
  }

  static long splitmix64(long state) {
    long z = state + GOLDEN_GAMMA;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  static double unitUniform(String key) {
    long bits = splitmix64(fnv1a64(key.getBytes(StandardCharsets.UTF_8))) >>> 12;
    return (bits + 0.5) * 0x1.0p-52;
  }

  static double exactLog(double x) {
    int e = Math.getExponent(x) + 1;          // x = m * 2^e with m in [0.5, 1), as Python's frexp
    double m = Math.scalb(x, -e);
    if (m < SQRT_HALF) {
      m *= 2.0;
      e -= 1;
    }
    double t = (m - 1.0) / (m + 1.0);
    double t2 = t * t;
    double s = 0.0;
    for (int k = LOG_TERMS - 1; k >= 0; k--) {
      s = s * t2 + 1.0 / (2 * k + 1);
    }
    return 2.0 * t * s + e * LN2;
  }

  static double exactExp(double x) {
    int k = (int) Math.floor(x / LN2 + 0.5);
    double r = x - k * LN2;
    double s = 1.0;
    for (int i = EXP_TERMS; i >= 1; i--) {
      s = 1.0 + r * s / i;
    }
    return Math.scalb(s, k);
  }

  static double normalQuantile(double u) {
    if (u < LOW || u > 1.0 - LOW) {
      double q = Math.sqrt(-2.0 * exactLog(u < LOW ? u : 1.0 - u));
      double tail = (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
          / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0);
      return u < LOW ? tail : -tail;
    }
    double q = u - 0.5;
    double r = q * q;
    return (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
        / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0);
  }

  static double jitterFactor(double sigma, String key) {
    if (sigma <= 0) {
      return 1.0;
    }
    return exactExp(sigma * normalQuantile(unitUniform(key)));
  }

  static double operationMs(Profile p, String kind, long sizeBytes, double factor) {
    switch (kind) {
      case "create": return (p.smallWriteMs + p.transferMs(sizeBytes)) * factor;
      case "read": return (p.readMs + p.transferMs(sizeBytes)) * factor;
      case "rename": return p.renameMs * factor;
      case "exists": return p.readMs * factor;
      case "list": return p.listMs * factor;
      case "delete": return p.deleteMs * factor;
      default: throw new IllegalArgumentException("unknown storage operation '" + kind + "'");
    }
  }

  static int kindIndex(String kind) {
    for (int i = 0; i < KINDS.length; i++) {
      if (KINDS[i].equals(kind)) {
        return i;
      }
    }
    throw new IllegalArgumentException("unknown storage operation '" + kind + "'");
  }

  private final Profile profile;
  private final String stream;
  private final long[] sequence = new long[KINDS.length];

  /** The draws of one stream of operations, "<seed>/<name>" (the engine's "7/driver", say). */
  public LatencyDraws(Profile profile, String stream) {
    this.profile = profile;
    this.stream = stream;
  }

  /** The next operation of this kind's latency, ms. */
  public synchronized double draw(String kind, long sizeBytes) {
    int index = kindIndex(kind);
    long n = sequence[index]++;
    String key = stream + "/" + kind + "/" + n;
    return operationMs(profile, kind, sizeBytes, jitterFactor(profile.jitterSigma, key));
  }

  public static void main(String[] args) {
    if (args.length < 2) {
      System.err.println("usage: LatencyDraws <stream> <name=value,...> <kind:bytes>...");
      System.exit(2);
    }
    LatencyDraws draws = new LatencyDraws(Profile.parse(args[1]), args[0]);
    for (int i = 2; i < args.length; i++) {
      String[] op = args[i].split(":", 2);
      long size = op.length > 1 ? Long.parseLong(op[1]) : 0L;
      double ms = draws.draw(op[0], size);
      System.out.println(op[0] + " " + size + " " + ms + " "
          + String.format(Locale.ROOT, "%016x", Double.doubleToRawLongBits(ms)));
    }
  }
}
