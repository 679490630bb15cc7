#!/bin/sh
# Make the certificates the TLS tests use, in DIR (which must exist):
#   ca.crt/ca.key         the test CA
#   other-ca.crt          an unrelated CA (a server it did not sign)
#   server.crt/.key       for localhost and 127.0.0.1, signed by ca
#   client.crt/.key       a client certificate, signed by ca
#   expired.crt/.key      for localhost and 127.0.0.1, expired in 2020
#   wrongname.crt/.key    for other.example only
#   rogue.crt/.key        a self-signed client certificate
# Usage: tls-certs.sh DIR [OPENSSL]
set -eu
dir=$1
openssl=${2:-openssl}
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "tls-certs.sh: $* failed" >&2; "$@"; exit 1; }; }

key() { quiet "$openssl" genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

key ca.key
quiet "$openssl" req -x509 -new -key ca.key -days 3650 -subj "/CN=delayq test CA" -out ca.crt
key other-ca.key
quiet "$openssl" req -x509 -new -key other-ca.key -days 3650 -subj "/CN=another CA" \
    -out other-ca.crt

# sign NAME CN SAN [START END]: NAME.key and NAME.crt signed by ca
cat > ca.cnf <<'CNF'
[ ca ]
default_ca = test
[ test ]
database = index.txt
serial = serial
new_certs_dir = .
default_md = sha256
policy = any
copy_extensions = copy
[ any ]
commonName = supplied
CNF
: > index.txt
echo "unique_subject = no" > index.txt.attr
echo 01 > serial
sign() {
    key "$1.key"
    quiet "$openssl" req -new -key "$1.key" -subj "/CN=$2" -addext "subjectAltName=$3" \
        -out "$1.csr"
    if [ $# -gt 3 ]; then
        quiet "$openssl" ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -notext \
            -startdate "$4" -enddate "$5" -in "$1.csr" -out "$1.crt"
    else
        quiet "$openssl" ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -notext \
            -days 3650 -in "$1.csr" -out "$1.crt"
    fi
}
sign server localhost "DNS:localhost,IP:127.0.0.1"
sign client "delayq client" "DNS:client.example"
sign expired localhost "DNS:localhost,IP:127.0.0.1" 20200101000000Z 20200102000000Z
sign wrongname other.example "DNS:other.example"
# a client certificate no CA of the server's signed
key rogue.key
quiet "$openssl" req -x509 -new -key rogue.key -days 3650 -subj "/CN=rogue client" \
    -out rogue.crt
