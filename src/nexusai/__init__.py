"""nexusai: a self-hosted long-term memory service for chat assistants."""

__version__ = "0.1.0"
