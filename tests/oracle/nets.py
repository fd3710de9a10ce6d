"""PyTorch twins of samples/nets/lenet.mgt and mlp.mgt: attribute names are
the .mgt node names, so state_dict keys are mge's parameter names; and
randomize_bn for the torchvision nets. Shared by the oracle tests and
scripts/bench-train."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(3136, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetPlain(nn.Module):
    """LeNet without batch normalization (LENET_PLAIN_MGT): Adam's first
    steps amplify the last-bit rounding of near-zero gradients, and batch
    normalization makes the conv biases' gradients exactly that (zero up to
    rounding), so the strict 1e-5 Adam comparisons use this twin."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(3136, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


LENET_PLAIN_MGT = """input  x     : f32[N,1,28,28]
input  label : i32[N]
conv1 = conv2d(x, out=32, kernel=3, pad=1)
relu1 = relu(conv1)
pool1 = maxpool2d(relu1, kernel=2)
conv2 = conv2d(pool1, out=64, kernel=3, pad=1)
relu2 = relu(conv2)
pool2 = maxpool2d(relu2, kernel=2)
flat  = flatten(pool2)
fc1   = linear(flat, out=128)
act1  = relu(fc1)
fc2   = linear(act1, out=10)
loss  = cross_entropy(fc2, label)
output fc2
minimize loss
"""


def randomize_bn(model, gen):
    """Running stats away from 0/1 so a wrong BatchNorm would show."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)
