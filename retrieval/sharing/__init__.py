"""A shared app: who owns what, which encoders a client may load, and the memory an open workspace holds."""
