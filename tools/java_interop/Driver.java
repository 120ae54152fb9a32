import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.agentscope.core.state.State;
import io.agentscope.core.state.VersionedState;
import io.agentscope.extensions.mysql.state.MysqlAgentStateStore;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import javax.sql.DataSource;

/**
 * A command-line driver for AgentScope Java's real MysqlAgentStateStore (tools/java_interop).
 * Usage: java -cp CP Driver JDBC_URL DB TABLE CREATE(true|false) [op-json ...]  (JDBC_URL with ?user=...&password=...)
 * Each op is a JSON array, e.g. ["save","alice","s1","k",{"a":1}] ; with no op args, reads one op per stdin line.
 * Prints one JSON line per op: {"op":..,"ok":true,"result":..} or {"op":..,"ok":false,"error":..}.
 * State items are J: a JSON node with content-based hashCode (like a record). Set env ITEM=identity for
 * identity hashCode (like io.agentscope.core.message.Msg, which does not override hashCode).
 */
public class Driver {
    static final ObjectMapper M = new ObjectMapper();
    static final boolean IDENTITY = "identity".equals(System.getenv("ITEM"));

    public static class J implements State {
        final JsonNode node;
        @JsonCreator(mode = JsonCreator.Mode.DELEGATING)
        public J(JsonNode node) { this.node = node; }
        @JsonValue public JsonNode node() { return node; }
        @Override public int hashCode() { return IDENTITY ? System.identityHashCode(this) : node.hashCode(); }
        @Override public boolean equals(Object o) { return IDENTITY ? this == o : (o instanceof J && ((J) o).node.equals(node)); }
    }

    static class DS implements DataSource {
        final String url;
        DS(String url) { this.url = url; }
        public Connection getConnection() throws java.sql.SQLException { return DriverManager.getConnection(url); }
        public Connection getConnection(String u, String p) throws java.sql.SQLException { return DriverManager.getConnection(url, u, p); }
        public java.io.PrintWriter getLogWriter() { return null; }
        public void setLogWriter(java.io.PrintWriter out) {}
        public void setLoginTimeout(int s) {}
        public int getLoginTimeout() { return 0; }
        public java.util.logging.Logger getParentLogger() { return null; }
        public <T> T unwrap(Class<T> i) { return null; }
        public boolean isWrapperFor(Class<?> i) { return false; }
    }

    static String s(JsonNode n) { return n == null || n.isNull() ? null : n.asText(); }

    public static void main(String[] a) throws Exception {
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        MysqlAgentStateStore st;
        try {
            st = new MysqlAgentStateStore(new DS(a[0]), a[1], a[2], Boolean.parseBoolean(a[3]));
        } catch (Exception e) {
            ObjectNode r = M.createObjectNode(); r.put("op", "init"); r.put("ok", false); r.put("error", chain(e));
            out.println(M.writeValueAsString(r)); System.exit(2); return;
        }
        java.util.Iterator<String> ops;
        if (a.length > 4) {
            ops = java.util.Arrays.asList(a).subList(4, a.length).iterator();
        } else {   // streamed: one op per stdin line, each run (and answered) as soon as it is read
            ops = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).lines().filter(l -> !l.isBlank()).iterator();
        }
        while (ops.hasNext()) {
            String line = ops.next();
            ArrayNode op = (ArrayNode) M.readTree(line);
            ObjectNode r = M.createObjectNode();
            r.set("op", op.get(0));
            try {
                r.set("result", run(st, op));
                r.put("ok", true);
            } catch (Exception e) {
                r.put("ok", false); r.put("error", chain(e));
            }
            out.println(M.writeValueAsString(r));
        }
    }

    static String chain(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) { if (sb.length() > 0) sb.append(" <- "); sb.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage()); }
        return sb.toString();
    }

    static JsonNode run(MysqlAgentStateStore st, ArrayNode op) throws Exception {
        String name = op.get(0).asText();
        switch (name) {
            case "save": st.save(s(op.get(1)), s(op.get(2)), s(op.get(3)), new J(op.get(4))); return M.nullNode();
            case "saveList": {
                List<J> l = new ArrayList<>(); for (JsonNode n : op.get(4)) l.add(new J(n));
                st.save(s(op.get(1)), s(op.get(2)), s(op.get(3)), l); return M.nullNode(); }
            case "get": { Optional<J> v = st.get(s(op.get(1)), s(op.get(2)), s(op.get(3)), J.class);
                ObjectNode r = M.createObjectNode(); r.put("present", v.isPresent()); r.set("value", v.map(j -> j.node).orElse(M.nullNode())); return r; }
            case "getList": { List<J> l = st.getList(s(op.get(1)), s(op.get(2)), s(op.get(3)), J.class);
                ArrayNode r = M.createArrayNode(); for (J j : l) r.add(j.node); return r; }
            case "getVersioned": { VersionedState<J> v = st.getVersioned(s(op.get(1)), s(op.get(2)), s(op.get(3)), J.class);
                ObjectNode r = M.createObjectNode(); r.set("value", v.value() == null ? M.nullNode() : v.value().node); r.put("version", v.version()); return r; }
            case "saveIfVersion": return M.getNodeFactory().numberNode(st.saveIfVersion(s(op.get(1)), s(op.get(2)), s(op.get(3)), new J(op.get(4)), op.get(5).asLong()));
            case "delete": if (op.size() > 3) st.delete(s(op.get(1)), s(op.get(2)), s(op.get(3))); else st.delete(s(op.get(1)), s(op.get(2))); return M.nullNode();
            case "exists": return M.getNodeFactory().booleanNode(st.exists(s(op.get(1)), s(op.get(2))));
            case "listSessionIds": { ArrayNode r = M.createArrayNode(); for (String x : new TreeSet<>(st.listSessionIds(s(op.get(1))))) r.add(x); return r; }
            case "clearAllSessions": return M.getNodeFactory().numberNode(st.clearAllSessions());
            case "truncateAllSessions": return M.getNodeFactory().numberNode(st.truncateAllSessions());
            case "supportsVersioning": return M.getNodeFactory().booleanNode(st.supportsVersioning());
            default: throw new IllegalArgumentException("unknown op " + name);
        }
    }
}
