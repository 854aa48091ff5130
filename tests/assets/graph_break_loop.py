"""Test script: a plain loop whose repeated block has a graph break and whose inputs change shape."""

import torch

import sagemaker_tc


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        x = torch.relu(self.linear(x))
        torch._dynamo.graph_break()  # GRAPH-BREAK-HERE
        return x + 1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).mean()


model = sagemaker_tc.compile_model(Net())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    rows = 4 if step < 2 else 6  # a new batch size: a recompile
    loss = model(torch.ones(rows, 8))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
