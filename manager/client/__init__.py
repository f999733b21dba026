"""How the operator talks to the API server: the JSON client and its credentials."""
