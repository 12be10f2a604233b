"""The gRPC surface: the servicer, the wire form of every RPC, and the interceptors around each call."""
