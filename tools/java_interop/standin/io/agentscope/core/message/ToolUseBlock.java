package io.agentscope.core.message;

// A stand-in written for this harness: AgentScope's JsonUtils names this class in a method the
// state store never calls; the real one pulls in the whole message model.
public class ToolUseBlock {
    public String getContent() { return null; }
    public String getName() { return null; }
    public Object getInput() { return null; }
}
