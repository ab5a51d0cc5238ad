"""Search engines behind one interface, their corpus format and their HTTP server."""
