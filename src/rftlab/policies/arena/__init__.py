"""Arena policies: the scripted local-priority table and baselines, reply providers (oracle, scripted,
endpoint) and a local OpenAI-compatible server."""
