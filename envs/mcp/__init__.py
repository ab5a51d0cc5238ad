from toolgym.envs.mcp.env import MCPEnv

__all__ = ["MCPEnv"]
