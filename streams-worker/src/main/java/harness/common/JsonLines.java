package harness.common;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The harness's evidence files (crash log, events): one JSON object per line,
 * appended by many processes at once. A line is written with one O_APPEND
 * write, so writers never interleave, never through a symbolic link; the
 * crash log's lines are also forced to disk, so they survive the halt that
 * follows. Reading skips torn or foreign lines instead of failing.
 */
public final class JsonLines {
    private JsonLines() {
    }

    /** Appends {@code node} as one line; {@code force}: to disk before returning. */
    public static void append(ObjectMapper json, Path path, JsonNode node, boolean force) throws IOException {
        byte[] line = (json.writeValueAsString(node) + "\n").getBytes(StandardCharsets.UTF_8);
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                                               StandardOpenOption.APPEND, LinkOption.NOFOLLOW_LINKS)) {
            ByteBuffer buf = ByteBuffer.wrap(line);
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
            if (force) {
                ch.force(true);
            }
        }
    }

    /**
     * The JSON objects of the file's lines, read as the Python side reads them (harness/runtime/crashlog.py):
     * bytes that are not UTF-8 replaced, a line that is not exactly one JSON object skipped (trailing junk
     * too); a missing file has none.
     */
    public static List<JsonNode> read(ObjectMapper json, Path path) throws IOException {
        String text;
        try {
            text = new String(Files.readAllBytes(path), StandardCharsets.UTF_8);    // malformed bytes: U+FFFD
        } catch (NoSuchFileException e) {
            return List.of();
        }
        ObjectReader strict = json.reader().with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
        List<JsonNode> out = new ArrayList<>();
        for (String line : text.split("\n")) {
            if (line.isBlank()) {
                continue;
            }
            try {
                JsonNode n = strict.readTree(line);
                if (n != null && n.isObject()) {
                    out.add(n);
                }
            } catch (IOException torn) {
                // a line cut by a crash, or not ours
            }
        }
        return out;
    }
}
