"""nexusai inside agent frameworks: thin adapters over `nexusai.client`, each in the module
named after its framework (`langchain`, `langgraph`, `openai_agents`), each needing that
framework's extra (`pip install 'nexusai[langchain]'`, `'nexusai[openai-agents]'`)."""
