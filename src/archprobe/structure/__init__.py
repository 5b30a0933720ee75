"""From config.json and tensor headers to a structure: layer plan, parameters, features (no torch)."""
