// The client scenario in Java with plain JDBC over pgjdbc (built and run by
// ../java.sh). A fencing token is a bigint: getLong()/setLong(), no type
// mapping. The stale-write error arrives as org.postgresql.util.PSQLException
// with getSQLState() "23T01"; getServerErrorMessage() has detail and hint.
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

public final class FencingClient {
    static final String RESOURCE = "clients:java";
    static final long ABOVE_2_53 = 9007199254740993L; // 2^53 + 1
    static int failures = 0;

    static void check(boolean ok, String what) {
        System.out.println((ok ? "ok - " : "FAILED - ") + what);
        if (!ok) failures++;
    }

    static Connection connect() throws SQLException {
        String url = "jdbc:postgresql://" + env("PGHOST", "localhost") + ":" + env("PGPORT", "5432") + "/"
                + env("PGDATABASE", "postgres");
        return DriverManager.getConnection(url, env("PGUSER", "postgres"), "");
    }

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static long token(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) ps.setObject(i + 1, params[i]);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    static int write(Connection c, long token) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "UPDATE java_ledger SET balance = balance + 1, fence_token = ? WHERE id = 1")) {
            ps.setLong(1, token);
            return ps.executeUpdate();
        }
    }

    public static void main(String[] args) throws Exception {
        try (Connection setup = connect(); Statement st = setup.createStatement()) {
            st.execute("SET client_min_messages = warning");
            st.execute("CREATE EXTENSION IF NOT EXISTS fencing");
            st.execute("DROP TABLE IF EXISTS java_ledger");
            st.execute("CREATE TABLE java_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)");
            // protect() refuses tables holding tokens past 2^52: protect first,
            // then a superuser moves the counter past 2^53 + 1.
            st.execute("SELECT fencing.protect('java_ledger')");
            st.execute("SELECT fencing.advance_past('java_ledger', " + ABOVE_2_53 + ")");
            st.execute("INSERT INTO java_ledger VALUES (1, 0, " + ABOVE_2_53 + ")");
        }
        Connection s1 = connect(), s2 = connect();
        // (1) acquire; not reentrant by default.
        long t1 = token(s1, "SELECT fencing.acquire(?)", RESOURCE);
        check(t1 > ABOVE_2_53, "acquire: T1 = " + t1 + " is a long above 2^53 + 1");
        try {
            token(s1, "SELECT fencing.acquire(?)", RESOURCE);
            check(false, "a second plain acquire fails");
        } catch (SQLException e) {
            check("55006".equals(e.getSQLState()), "a second plain acquire fails with SQLState " + e.getSQLState());
        }
        // (2) setLong / getLong.
        check(write(s1, t1) == 1, "fenced write with T1 accepted (setLong)");
        long stored = token(s1, "SELECT fence_token FROM java_ledger WHERE id = 1");
        Object obj;
        try (Statement st = s1.createStatement(); ResultSet rs = st.executeQuery("SELECT fence_token FROM java_ledger")) {
            rs.next();
            obj = rs.getObject(1);
        }
        check(stored == t1 && obj instanceof Long && (Long) obj == t1,
              "T1 read back exactly with getLong, getObject is a Long (" + stored + ")");
        token(s1, "SELECT fencing.release(?)::int", RESOURCE);
        long t2 = token(s2, "SELECT fencing.acquire(?, wait => '10 s')", RESOURCE);
        check(t2 > t1 && write(s2, t2) == 1, "T2 > T1, fenced write with T2 accepted");

        // (3) the stale write.
        try {
            write(s1, t1);
            check(false, "stale write rejected");
        } catch (PSQLException e) {
            ServerErrorMessage m = e.getServerErrorMessage();
            check("23T01".equals(e.getSQLState()), "stale write raises PSQLException with SQLState " + e.getSQLState());
            check(m != null && "stale fence token for relation \"java_ledger\"".equals(m.getMessage())
                  && m.getDetail() != null && m.getHint() != null,
                  "message, detail and hint reachable through getServerErrorMessage()");
        }
        check(token(s1, "SELECT 1") == 1, "the connection is usable after the error");
        token(s2, "SELECT fencing.release(?)::int", RESOURCE);

        // (4) acquire_xact with setAutoCommit(false).
        s1.setAutoCommit(false);
        long t3 = token(s1, "SELECT fencing.acquire_xact(?)", RESOURCE);
        write(s1, t3);
        s1.commit();
        check(t3 > t2 && token(s1, "SELECT count(*) FROM fencing.locks WHERE resource = ?", RESOURCE) == 0,
              "acquire_xact in a JDBC transaction: T3 > T2, the lock ended with the commit");
        // (5) fencing.use(?) with setLong, then a write that carries no token.
        long t4 = token(s1, "SELECT fencing.acquire_xact(?)", RESOURCE);
        try (PreparedStatement ps = s1.prepareStatement("SELECT fencing.use(?)")) {
            ps.setLong(1, t4);
            ps.executeQuery().close();
        }
        try (Statement st = s1.createStatement()) {
            st.executeUpdate("UPDATE java_ledger SET balance = balance + 1 WHERE id = 1");
        }
        s1.commit();
        s1.setAutoCommit(true);
        check(token(s1, "SELECT fence_token FROM java_ledger WHERE id = 1") == t4,
              "use(?) stamped the write that carries no token with T4");

        // (6) lease expiry: the server ends the silent holder's connection.
        Connection s3 = connect();
        long t5 = token(s3, "SELECT fencing.acquire(?, lease => '1 s')", RESOURCE);
        Thread.sleep(2500);
        try {
            token(s3, "SELECT 1");
            check(false, "the connection of the expired lease was ended");
        } catch (SQLException e) {
            check("57P05".equals(e.getSQLState()) && e.getMessage().contains("fencing lease of 1000 ms expired"),
                  "the expired lease ended the connection (SQLState " + e.getSQLState() + ": "
                  + e.getMessage().split("\n")[0] + ")");
        }
        check(s3.isClosed() || !s3.isValid(1), "pgjdbc reports the connection closed");
        Connection s4 = connect();
        long t6 = token(s4, "SELECT fencing.acquire(?)", RESOURCE);
        check(t6 > t5 && write(s4, t6) == 1, "reconnected: acquired again with a greater token and wrote");
        try {
            write(s4, t5);
            check(false, "the expired lease's token is stale");
        } catch (SQLException e) {
            check("23T01".equals(e.getSQLState()), "a write with the expired lease's token fails with 23T01");
        }
        token(s4, "SELECT fencing.release_all()");
        for (Connection c : new Connection[] {s1, s2, s3, s4}) c.close();
        System.out.println("pgjdbc " + org.postgresql.util.DriverInfo.DRIVER_VERSION + ": "
                + (failures > 0 ? failures + " check(s) failed" : "all checks passed"));
        System.exit(failures > 0 ? 1 : 0);
    }
}
