package harness.common;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Properties;

/**
 * The deliberate external effect: one ledger row per processed record, written
 * on its own auto-committed connection, outside Kafka's transaction. A record
 * that is processed again after a crash therefore gets a second row.
 *
 * <p>With a dedupe table ({@link #insertDeduped}) the row is guarded by an
 * idempotency key in ONE Postgres transaction: a record processed again finds
 * its key and writes nothing (a dedupe hit), as the Python workers' dedupe does.
 * Table names are checked against {@link #TABLE} by the callers' options: they
 * are put into the SQL text.
 */
public final class Ledger implements AutoCloseable {
    /** schema.table or table, plain SQL identifiers only. */
    public static final java.util.regex.Pattern TABLE =
        java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?");

    private final Connection conn;
    private final PreparedStatement insert;

    private final PreparedStatement dedupe;   // null without a dedupe table

    public Ledger(String url, String user, String password, String table, String application) throws SQLException {
        this(url, user, password, table, null, application);
    }

    public Ledger(String url, String user, String password, String table, String dedupeTable, String application)
            throws SQLException {
        Properties p = new Properties();
        if (user != null) {
            p.setProperty("user", user);
        }
        if (password != null) {
            p.setProperty("password", password);
        }
        p.setProperty("connectTimeout", "10");
        p.setProperty("socketTimeout", "30");
        p.setProperty("ApplicationName", application);
        conn = DriverManager.getConnection(url, p);
        conn.setAutoCommit(true);
        // `table` was checked against a plain-identifier pattern in Options.
        insert = conn.prepareStatement(
            "INSERT INTO " + table + " (message_id, amount, worker, attempt) VALUES (?, ?, ?, ?)");
        dedupe = dedupeTable == null ? null : conn.prepareStatement(
            "INSERT INTO " + dedupeTable + " AS d (message_id) VALUES (?) "
            + "ON CONFLICT (message_id) DO UPDATE SET hits = d.hits + 1 RETURNING d.hits");
    }

    /** Called from one thread only. */
    public void insert(String messageId, long amount, String worker, int attempt) throws SQLException {
        insert.setString(1, messageId);
        insert.setLong(2, amount);
        insert.setString(3, worker);
        insert.setInt(4, attempt);
        insert.executeUpdate();
    }

    /**
     * The dedupe key and, if it is new, the ledger row, in one Postgres transaction; {@code inside} runs
     * between the two with the transaction open (a kill point: dying there rolls both back). True if the row
     * was written, false on a dedupe hit.
     */
    public boolean insertDeduped(String messageId, long amount, String worker, int attempt, Runnable inside)
            throws SQLException {
        conn.setAutoCommit(false);
        try {
            dedupe.setString(1, messageId);
            long hits;
            try (java.sql.ResultSet rs = dedupe.executeQuery()) {
                rs.next();
                hits = rs.getLong(1);
            }
            if (hits == 0) {
                inside.run();
                insert(messageId, amount, worker, attempt);
            }
            conn.commit();
            return hits == 0;
        } catch (SQLException | RuntimeException e) {
            conn.rollback();
            throw e;
        } finally {
            conn.setAutoCommit(true);
        }
    }

    /** A payment's amount, from its JSON value ({@code {"amount": N, ...}}); 0 when it has none. */
    public static long amount(com.fasterxml.jackson.databind.ObjectMapper json, String value) {
        try {
            com.fasterxml.jackson.databind.JsonNode v = value == null ? null : json.readTree(value);
            com.fasterxml.jackson.databind.JsonNode a = v == null ? null : v.get("amount");
            return a != null && a.canConvertToLong() ? a.asLong() : 0;
        } catch (java.io.IOException e) {
            return 0;
        }
    }

    /** Whether the connection still answers; a warm spare checks the connection it opened before using it. */
    public boolean usable(int timeoutSeconds) {
        try {
            return conn.isValid(timeoutSeconds);
        } catch (SQLException e) {
            return false;
        }
    }

    @Override
    public void close() {
        try {
            conn.close();
        } catch (SQLException ignored) {
            // closing on the way out
        }
    }
}
