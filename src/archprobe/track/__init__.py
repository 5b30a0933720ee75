"""`archprobe track`: reach signals (hub downloads, likes, files, mirrors) and usage signals
(inference servers' request and token counters), and adaptation signals (framework releases and upstream
work, track/adaptation.py), stored apart and never combined."""
