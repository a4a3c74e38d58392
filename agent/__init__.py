"""The translator, the langgraph agent, LLM providers, chat, MCP and the `kport` dispatcher."""

VERBS = {
    "doctor": ("agent.doctor", "check what this machine can run and where kport keeps its state"),
    "translate": ("agent.translate_cli", "offline draft of a CUDA kernel in Metal, with coverage"),
}
