"""The translator, the langgraph agent, LLM providers, chat, MCP and the `kport` dispatcher."""

VERBS = {
    "doctor": ("agent.doctor", "check what this machine can run and where kport keeps its state"),
}
