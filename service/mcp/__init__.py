"""The MCP adapter: the same domain functions as the HTTP API, as MCP tools.

tools.py     the tools: names, descriptions for the model, input models, thin runners
server.py    build_server(backend): the SDK's low-level Server over those tools
backends.py  LocalBackend (domain calls, one unit of work and one audit row per call)
             and RemoteBackend (a ctxpack over HTTP, for ``ctxpack mcp --url``)
http.py      /mcp: streamable HTTP in the app, Bearer keys checked before MCP sees a byte
(``ctxpack mcp``, stdio with the key from CTXPACK_API_KEY, is service/cli/mcp.py)
inputs.py    input models of the tools with no HTTP body; limits.py, results.py: shaping
"""
