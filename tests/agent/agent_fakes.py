"""Scripted LLM replies for the agent tests (imported by name: tests/agent is no package, so
that it cannot shadow the agent package)."""

from langchain_core.messages import AIMessage

SAXPY_OK = ("```metal\nuint i = thread_position_in_grid.x;\n"
            "if (i < uint(n)) y_out[i] = a * x[i] + y[i];\n```")
SAXPY_NO_COMPILE = ("```metal\nuint i = thread_position_in_grid.x;\n"
                    "if (i < uint(n)) y_out[i] = a * x[i] + y[i] + not_declared;\n```")
SAXPY_WRONG = ("```metal\nuint i = thread_position_in_grid.x;\n"
               "if (i < uint(n)) y_out[i] = a * x[i];\n```")


def reply(text: str, tokens_in: int = 900, tokens_out: int = 60) -> AIMessage:
    """A chat reply with provider-style usage metadata."""
    return AIMessage(content=text, usage_metadata={"input_tokens": tokens_in,
                                                   "output_tokens": tokens_out,
                                                   "total_tokens": tokens_in + tokens_out})


def launch(threadgroup: int) -> str:
    """A json block changing the threadgroup size."""
    return f'\n```json\n{{"threadgroup": [{threadgroup}, 1, 1]}}\n```'
