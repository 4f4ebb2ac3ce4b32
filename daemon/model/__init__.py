"""Talking to the model server (Ollama's API) and the hosts behind it."""
