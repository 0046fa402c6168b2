"""The orchestration service: decides what the LLM sees. Never touches SQL directly."""
