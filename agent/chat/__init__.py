"""`kport chat`: interactive porting sessions (slash commands, grounded questions, approval
before writes), checkpointed in SQLite by langgraph so they resume after a crash."""
