package harness.common;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Locale;

/**
 * This process's own numbers from the kernel ({@code /proc/self/stat}, Linux): the CPU time it has used
 * and when it started; a file read, where the JDK's management beans would need their server started
 * first (the transactional worker never starts it). Clock ticks are USER_HZ, 100 a second on Linux.
 */
public final class SelfStat {
    private static final double TICKS = 100.0;

    private SelfStat() {
    }

    /** The fields after the command name: index 0 is field 3 (state), so field N is index N - 3. */
    private static String[] fields() throws IOException {
        String stat = new String(Files.readAllBytes(Paths.get("/proc/self/stat")), StandardCharsets.US_ASCII);
        return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    }

    /** User and system CPU seconds of this process (all its threads) so far, or "unknown". */
    public static String cpuSeconds() {
        try {
            String[] f = fields();
            long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]);      // fields 14 utime, 15 stime
            return String.format(Locale.ROOT, "%.2f", ticks / TICKS);
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    /**
     * When the kernel started this process, in seconds since the epoch, to about 10 ms (or "unknown"): its
     * start in clock ticks since boot (field 22) set against the time since boot now (/proc/uptime). The
     * JDK's ProcessHandle start instant adds the boot time, which the kernel gives in whole seconds only.
     */
    public static String startTime() {
        try {
            long ticks = Long.parseLong(fields()[19]);
            String uptime = new String(Files.readAllBytes(Paths.get("/proc/uptime")), StandardCharsets.US_ASCII);
            double now = System.currentTimeMillis() / 1000.0;
            double up = Double.parseDouble(uptime.split(" ")[0]);
            return String.format(Locale.ROOT, "%.6f", now - (up - ticks / TICKS));
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }
}
