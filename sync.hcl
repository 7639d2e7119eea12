provider "127.0.0.1:18443/hashicorp/random" {
  versions = ["3.6.0"]
}
