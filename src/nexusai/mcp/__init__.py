"""nexusai as an MCP server: the tools (`tools`), served over /mcp by the app and over
stdio by `nexus mcp`."""
