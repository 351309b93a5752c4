"""A CPU program that runs a model without an optimizer (inference, or a loop with a hand-written update): nothing
for libkineto to count iterations by. Prints "ready" once it runs."""

import time

import torch

model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
x = torch.randn(32, 64)
print("ready", flush=True)
while True:
    with torch.no_grad():
        model(x)
    time.sleep(0.01)
