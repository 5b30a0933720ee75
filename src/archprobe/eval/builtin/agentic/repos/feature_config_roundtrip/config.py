from dataclasses import dataclass


@dataclass
class Config:
    name: str
    workers: int = 1
    verbose: bool = False
