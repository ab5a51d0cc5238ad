"""Sandboxes for model-written code (bubblewrap, Docker), warm pools, SandboxFusion server.

(Arrives with the code-execution work; the package exists so the layout and namespace are fixed.)
"""
