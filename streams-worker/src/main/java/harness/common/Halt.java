package harness.common;

/**
 * {@code Runtime.halt} without HotSpot's ~300 ms wait at exit.
 *
 * <p>At its final safepoint the JVM waits up to 300 ms (in 10 ms steps) for
 * every other Java thread that is inside native code to come out. The Kafka
 * clients' I/O threads (producer sender, admin client) spend their idle time
 * in {@code epoll_wait}, so a plain halt took ~0.33 s from the call to the
 * process exit. Interrupting them just before the halt makes their selector
 * return at once; they come back into Java, where the exit safepoint stops
 * them, and the process is gone in ~10 ms.
 *
 * <p>Why that is safe here: an interrupt only wakes a selector; the clients'
 * sockets are non-blocking, and the JDK does not close non-blocking channels
 * on interrupt (checked on JDK 17), so nothing is closed and no request is sent
 * that the thread would not have sent anyway. Nothing can commit: the
 * transaction is committed only by the stream thread, and that is the thread
 * halting (or the one that failed). The crash line is already on disk. If a
 * future client renames its threads, they are simply not found and the exit
 * takes the old ~0.3 s.
 */
public final class Halt {
    /** Thread name prefixes of the Kafka clients' I/O threads (KafkaProducer, KafkaAdminClient). */
    private static final String[] IO_THREADS = {"kafka-producer-network-thread", "kafka-admin-client-thread"};

    private Halt() {
    }

    /** Halts the JVM with {@code status}; never returns. */
    public static void now(int status) {
        try {
            wakeIoThreads();
        } catch (RuntimeException ignored) {
            // best effort: halt anyway
        }
        Runtime.getRuntime().halt(status);
    }

    private static void wakeIoThreads() {
        ThreadGroup root = Thread.currentThread().getThreadGroup();
        while (root.getParent() != null) {
            root = root.getParent();
        }
        Thread[] all = new Thread[root.activeCount() + 16];
        int n = root.enumerate(all, true);
        Thread self = Thread.currentThread();
        for (int i = 0; i < n; i++) {
            Thread t = all[i];
            if (t != self && isIoThread(t.getName())) {
                t.interrupt();
            }
        }
    }

    private static boolean isIoThread(String name) {
        for (String prefix : IO_THREADS) {
            if (name.startsWith(prefix)) {
                return true;
            }
        }
        return false;
    }
}
