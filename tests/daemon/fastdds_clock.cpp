// SPDX-License-Identifier: MIT
//
// eProsima Fast DDS (Debian's libfastrtps-dev) on the ROS 2 /clock topic:
// the DDS implementation ROS 2 uses by default, as a second vendor against
// shmclockd's Cyclone DDS. The type support for rosgraph_msgs/msg/Clock is
// written by hand (two fields: int32 sec, uint32 nanosec, XCDR1 with its
// encapsulation header). Builtin transports are off; UDPv4 on 127.0.0.1
// only, with 127.0.0.1 as the initial peer (no multicast needed).
//
//   fastdds_clock pub DOMAIN SEC NANOSEC   publish that time every 20 ms,
//                                          best effort (as AWSIM), until killed
//   fastdds_clock sub DOMAIN N TIMEOUT_MS  print the first N samples as
//                                          "sec nanosec" lines; exit 1 on timeout
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <fastcdr/Cdr.h>
#include <fastcdr/FastBuffer.h>
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastrtps/utils/IPLocator.h>

using namespace eprosima::fastdds::dds;
using eprosima::fastcdr::Cdr;
using eprosima::fastcdr::FastBuffer;
using eprosima::fastrtps::rtps::InstanceHandle_t;
using eprosima::fastrtps::rtps::SerializedPayload_t;

namespace {

struct Clock {
	int32_t sec;
	uint32_t nanosec;
};

// rosgraph_msgs::msg::dds_::Clock_: a final struct of a final struct.
class ClockType : public TopicDataType {
public:
	ClockType()
	{
		setName("rosgraph_msgs::msg::dds_::Clock_");
		m_typeSize = 4 + 8; // encapsulation header + two 4-byte fields
		m_isGetKeyDefined = false;
	}

	bool serialize(void *data, SerializedPayload_t *payload) override
	{
		const Clock *c = static_cast<const Clock *>(data);
		FastBuffer buf(reinterpret_cast<char *>(payload->data), payload->max_size);
		Cdr ser(buf, Cdr::DEFAULT_ENDIAN, Cdr::DDS_CDR);

		payload->encapsulation = ser.endianness() == Cdr::BIG_ENDIANNESS ? CDR_BE : CDR_LE;
		ser.serialize_encapsulation();
		ser << c->sec << c->nanosec;
		payload->length = static_cast<uint32_t>(ser.getSerializedDataLength());
		return true;
	}

	bool deserialize(SerializedPayload_t *payload, void *data) override
	{
		Clock *c = static_cast<Clock *>(data);
		FastBuffer buf(reinterpret_cast<char *>(payload->data), payload->length);
		Cdr des(buf, Cdr::DEFAULT_ENDIAN, Cdr::DDS_CDR);

		try {
			des.read_encapsulation();
			payload->encapsulation = des.endianness() == Cdr::BIG_ENDIANNESS ? CDR_BE : CDR_LE;
			des >> c->sec >> c->nanosec;
		} catch (...) {
			return false;
		}
		return true;
	}

	std::function<uint32_t()> getSerializedSizeProvider(void *) override
	{
		return []() -> uint32_t { return 4 + 8; };
	}

	void *createData() override { return new Clock(); }
	void deleteData(void *data) override { delete static_cast<Clock *>(data); }
	bool getKey(void *, InstanceHandle_t *, bool) override { return false; }
};

DomainParticipant *make_participant(int domain)
{
	DomainParticipantQos qos;
	auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
	eprosima::fastrtps::rtps::Locator_t peer;

	udp->interfaceWhiteList.emplace_back("127.0.0.1");
	udp->maxInitialPeersRange = 60; // Cyclone's participant indices, up to 50
	qos.transport().use_builtin_transports = false;
	qos.transport().user_transports.push_back(udp);
	eprosima::fastrtps::rtps::IPLocator::setIPv4(peer, "127.0.0.1");
	qos.wire_protocol().builtin.initialPeersList.push_back(peer);
	qos.name("shmclock-fastdds-test");
	return DomainParticipantFactory::get_instance()->create_participant(domain, qos);
}

int usage()
{
	std::fprintf(stderr, "usage: fastdds_clock pub DOMAIN SEC NANOSEC\n"
			     "       fastdds_clock sub DOMAIN N TIMEOUT_MS\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 5 || (std::strcmp(argv[1], "pub") && std::strcmp(argv[1], "sub")))
		return usage();
	bool pub = !std::strcmp(argv[1], "pub");
	int domain = std::atoi(argv[2]);
	DomainParticipant *pp = make_participant(domain);

	if (!pp) {
		std::fprintf(stderr, "fastdds_clock: cannot create a participant\n");
		return 1;
	}
	TypeSupport type(new ClockType());
	type.register_type(pp);
	Topic *topic = pp->create_topic("rt/clock", type.get_type_name(), TOPIC_QOS_DEFAULT);

	if (!topic)
		return 1;
	if (pub) {
		Clock c{ static_cast<int32_t>(std::atol(argv[3])),
			 static_cast<uint32_t>(std::atol(argv[4])) };
		Publisher *p = pp->create_publisher(PUBLISHER_QOS_DEFAULT);
		DataWriterQos wq = DATAWRITER_QOS_DEFAULT;

		wq.reliability().kind = BEST_EFFORT_RELIABILITY_QOS;
		wq.durability().kind = VOLATILE_DURABILITY_QOS;
		wq.history().kind = KEEP_LAST_HISTORY_QOS;
		wq.history().depth = 1;
		DataWriter *w = p->create_datawriter(topic, wq);
		if (!w)
			return 1;
		for (;;) {
			w->write(&c);
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
		}
	}
	long want = std::atol(argv[3]), timeout_ms = std::atol(argv[4]), got = 0;
	Subscriber *s = pp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);
	DataReaderQos rq = DATAREADER_QOS_DEFAULT;

	rq.reliability().kind = RELIABLE_RELIABILITY_QOS; // matches shmclockd's reliable writer
	rq.durability().kind = VOLATILE_DURABILITY_QOS;
	rq.history().kind = KEEP_LAST_HISTORY_QOS;
	rq.history().depth = 1;
	DataReader *r = s->create_datareader(topic, rq);
	if (!r)
		return 1;
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
	while (got < want && std::chrono::steady_clock::now() < end) {
		Clock c{};
		SampleInfo info;

		if (r->take_next_sample(&c, &info) == ReturnCode_t::RETCODE_OK) {
			if (info.valid_data) {
				std::printf("%d %u\n", c.sec, c.nanosec);
				std::fflush(stdout);
				got++;
			}
		} else {
			r->wait_for_unread_message(eprosima::fastrtps::Duration_t(0, 100000000));
		}
	}
	pp->delete_contained_entities();
	DomainParticipantFactory::get_instance()->delete_participant(pp);
	return got == want ? 0 : 1;
}
