"""The translator, the langgraph agent, LLM providers, chat, MCP and the `kport` dispatcher."""

VERBS = {
    "doctor": ("agent.doctor", "check what this machine can run and where kport keeps its state"),
    "port": ("agent.port_cli", "port a CUDA kernel end to end: checked Metal port + package"),
    "translate": ("agent.translate_cli", "offline draft of a CUDA kernel in Metal, with coverage"),
    "perf": ("agent.perf_cli", "predict a CUDA or Metal kernel's GPU time from simulator counters"),
    "chat": ("agent.chat.cli", "an interactive porting session: slash commands, questions, diffs"),
    "mcp": ("agent.mcp_server", "serve kport's tools to coding assistants over MCP (stdio/HTTP)"),
}
