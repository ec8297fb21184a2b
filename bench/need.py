"""need(*packages): installs the Debian packages a bench script calls when they are missing
(apt-get, as root), so every script runs on a fresh machine. Import with
sys.path.insert(0, <bench dir>)."""
import os
import subprocess


def need(*packages):
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        print("installing", " ".join(missing), flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env, check=True,
                       stdout=subprocess.DEVNULL)
