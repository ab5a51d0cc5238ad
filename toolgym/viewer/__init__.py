"""`toolgym view`: a local web app over run directories (runs.py reads them, server.py serves
them with the assets in static/)."""
