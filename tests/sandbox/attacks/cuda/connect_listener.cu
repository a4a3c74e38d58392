// attack: connects to a listener on 127.0.0.1
// expect: sandbox
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a = {}; a.sin_family = AF_INET; a.sin_port = htons(@PORT@); a.sin_addr.s_addr = htonl(0x7f000001); connect(s, (sockaddr*)&a, sizeof a);
  }
}
