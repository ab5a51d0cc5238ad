"""The gateway: an agent the user already has trains on the policy through an OpenAI-compatible
URL whose calls are recorded token by token (server.py, session.py), played in groups by
the harness runner (harness.py, collector.py)."""
