"""Writers of checkpoints archprobe reads (the demo, tests, benchmarks): safetensors files, MXFP4 packing,
synthetic K3-shaped checkpoints. Kept out of the reading package (`archprobe.formats` never imports this)."""
