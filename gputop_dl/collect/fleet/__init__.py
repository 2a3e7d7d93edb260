"""Other nodes: reading their exporters (or a Prometheus) into `Node` values, and polling them live."""
