"""The delayq Python client.  Build it with `make` first (in the source
tree's build directory): make puts the generated scripts into the staged
copy of this package (BUILD/clients/python), which is what is installed."""
from setuptools import setup

setup(
    name="delayq",
    version="0.1.0",
    description="Producer client of the delayq delayed-job system (Redis)",
    license="BSD-2-Clause",
    packages=["delayq"],
    package_data={"delayq": ["scripts/*.lua"]},
    python_requires=">=3.9",
    install_requires=["redis>=4.3"],
)
