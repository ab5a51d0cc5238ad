"""Serving a policy: the OpenAI-compatible model server, its chat requests and replies."""
