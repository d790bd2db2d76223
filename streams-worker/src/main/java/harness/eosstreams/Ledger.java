package harness.eosstreams;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Properties;

/**
 * The deliberate external effect: one ledger row per processed record, written
 * on its own auto-committed connection, outside Kafka's transaction. A record
 * that is processed again after a crash therefore gets a second row.
 */
final class Ledger implements AutoCloseable {
    private final Connection conn;
    private final PreparedStatement insert;

    Ledger(String url, String user, String password, String table) throws SQLException {
        Properties p = new Properties();
        if (user != null) {
            p.setProperty("user", user);
        }
        if (password != null) {
            p.setProperty("password", password);
        }
        p.setProperty("connectTimeout", "10");
        p.setProperty("socketTimeout", "30");
        p.setProperty("ApplicationName", "eos-streams");
        conn = DriverManager.getConnection(url, p);
        conn.setAutoCommit(true);
        // `table` was checked against a plain-identifier pattern in Options.
        insert = conn.prepareStatement(
            "INSERT INTO " + table + " (message_id, amount, worker, attempt) VALUES (?, ?, ?, ?)");
    }

    /** Called from the single stream thread only. */
    void insert(String messageId, long amount, String worker, int attempt) throws SQLException {
        insert.setString(1, messageId);
        insert.setLong(2, amount);
        insert.setString(3, worker);
        insert.setInt(4, attempt);
        insert.executeUpdate();
    }

    /** Whether the connection still answers; a warm spare checks the connection it opened before using it. */
    boolean usable(int timeoutSeconds) {
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
