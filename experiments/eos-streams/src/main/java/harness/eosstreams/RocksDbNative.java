package harness.eosstreams;

import org.rocksdb.RocksDB;
import org.rocksdb.util.Environment;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;

/**
 * Loads RocksDB's native library from a fixed place under the state directory.
 *
 * <p>By default RocksDB copies its ~15 MB library into a new randomly named
 * file in java.io.tmpdir on every start and deletes it only at a normal JVM
 * exit. This worker halts on purpose, so every planned crash would leave one
 * such file behind. Here the library is copied once to
 * {@code <state-dir>/rocksdb-native/} (again only if its size differs), loaded
 * from there, and RocksDB then sees it as loaded when Streams asks for it.
 */
final class RocksDbNative {
    static final String DIR = "rocksdb-native";

    private RocksDbNative() {
    }

    static void load(Path stateDir) {
        // In the jar: librocksdbjni-<platform>.<ext>. RocksDB.loadLibrary(paths) (rocksdbjni 9.7)
        // looks in each path for getJniLibraryFileName("rocksdbjni"), i.e. librocksdbjnijni-...:
        // the copy gets the name that loader asks for.
        String name = Environment.getJniLibraryFileName("rocksdb");
        String loadName = Environment.getJniLibraryFileName("rocksdbjni");
        URL resource = RocksDbNative.class.getClassLoader().getResource(name);
        if (resource == null) {
            // Not shipped for this platform in the fat jar; RocksDB's own loader reports what it can.
            System.err.println("eos-streams: no bundled " + name + "; RocksDB will use its default loader");
            return;
        }
        try {
            Path dir = stateDir.toAbsolutePath().resolve(DIR);
            Files.createDirectories(dir);
            Path target = dir.resolve(loadName);
            URLConnection conn = resource.openConnection();
            long size = conn.getContentLengthLong();
            if (!Files.exists(target) || size < 0 || Files.size(target) != size) {
                Path tmp = Files.createTempFile(dir, name, ".part");
                try (InputStream in = conn.getInputStream()) {
                    Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
                }
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            }
            RocksDB.loadLibrary(List.of(dir.toString()));
        } catch (IOException | UnsatisfiedLinkError e) {
            System.err.println("eos-streams: cannot load RocksDB from the state directory (" + e
                               + "); RocksDB will use its default loader");
        }
    }
}
