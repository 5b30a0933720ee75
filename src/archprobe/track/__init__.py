"""`archprobe track`: reach signals (hub downloads, likes, files, mirrors) and usage signals
(inference servers' request and token counters), stored apart and never combined."""
