"""Framework integrations, each behind an extra of ctxpack-client:

- ``langchain``: ``ctxpack_tools`` - LangChain tools ``remember`` and ``context`` bound to a
  namespace (extra ``langchain``).
- ``langgraph``: ``CtxpackStore`` - a LangGraph ``BaseStore`` on keyed writes (extra
  ``langgraph``; LangMem's memory tools run on it, extra ``langmem``).
- ``openai_agents``: ``ctxpack_mcp_server`` - the OpenAI Agents SDK's streamable-HTTP MCP
  server pointed at ctxpack's ``/mcp`` (extra ``openai-agents``).
"""
